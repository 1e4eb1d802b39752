"""An operator takes its params as keywords as well as a dict (``Op(k=5)`` is ``Op({"k": 5})``): a keyword was a
bare ``TypeError: __init__() got an unexpected keyword argument``. A misspelt keyword is a ``ParamsError`` with
"did you mean", and a dict given with keywords is refused (which would win is a guess)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import ParamsError
from operators.registry import get_operator


def test_keywords_are_the_params_and_the_operator_runs_with_them():
    counter = get_operator("analyze.word_count")
    by_keywords = counter(input_column="title", output_column="n", step_id="count")
    assert by_keywords.params == counter({"input_column": "title", "output_column": "n"}).params
    assert by_keywords.step_id == "count"
    out = by_keywords(pa.table({"title": ["three words here"], "text": ["one"]}))
    assert out.column("n").to_pylist() == [3]


@pytest.mark.parametrize("name, keywords", [("retrieve.bm25", {"index": "idx", "k": 7}),
                                            ("fuse.rrf", {"k": 30})])
def test_operators_with_their_own_constructor_take_keywords_too(name, keywords):
    op = get_operator(name)(**keywords, input_steps=("a", "b"))
    assert op.params == get_operator(name)(keywords, input_steps=("a", "b")).params
    assert op.input_steps == ("a", "b")


def test_a_misspelt_keyword_says_which_param_was_meant():
    with pytest.raises(ParamsError) as err:
        get_operator("analyze.word_count")(input_col="title")
    assert err.value.field == "params.input_col"
    assert "did you mean 'input_column'" in err.value.message


def test_a_dict_and_keywords_both_are_refused():
    with pytest.raises(ParamsError) as err:
        get_operator("analyze.word_count")({"input_column": "text"}, output_column="n")
    assert err.value.field == "params"
    assert "as a dict or as keywords, not both" in err.value.message and "output_column" in err.value.message
