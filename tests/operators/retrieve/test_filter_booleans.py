"""A boolean in a filter meets a column of text: a real BM25 index whose ``reviewed`` column is text ("True", "yes",
"false", "no", as a CSV or a mixed JSONL field leaves it) refuses ``eq: true`` in every filter mode with an error
naming the condition, instead of comparing it as the text 'true' and silently matching nothing; the quoted value
compares as text, and a boolean still compares with a column of booleans."""

from __future__ import annotations

import pyarrow as pa
import pytest
import yaml

from operators.filters import FilterError
from operators.registry import create


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from operators.store import Index, IndexSettings

    path = tmp_path_factory.mktemp("booleans") / "reviews"
    Index.create(path, IndexSettings(dense=False)).add(pa.table({
        "docno": ["a#0", "b#0", "c#0", "d#0"], "doc_id": ["a", "b", "c", "d"], "title": ["A", "B", "C", "D"],
        "text": ["honey bees", "honey ants", "honey wasps", "honey moths"],
        "reviewed": ["True", "yes", "false", "no"],
        "draft": pa.array([True, False, True, False]),
    }))
    return str(path)


def search(index: str, flt: dict, mode: str = "pre") -> list[str]:
    query = pa.table({"qid": ["q"], "query": ["honey"]})
    out = create("retrieve.bm25", {"index": index, "k": 4, "filter": flt, "filter_mode": mode}, step_id="r")(query)
    return sorted(out.column("doc_id").to_pylist())


@pytest.mark.parametrize("mode", ["pre", "post"])
@pytest.mark.parametrize("written", ["{field: reviewed, eq: true}", "{field: reviewed, eq: yes}",
                                     "{field: reviewed, not_in: [no, 'false']}"])
def test_a_boolean_for_a_column_of_text_is_an_error_naming_the_condition(index, mode, written):
    flt = yaml.safe_load(written)  # YAML reads an unquoted yes or no as a boolean
    with pytest.raises(FilterError) as err:
        search(index, flt, mode)
    assert (err.value.field, err.value.step) == ("params.filter", "r")
    message = err.value.message
    assert "does not fit column 'reviewed' of type string (a boolean; the column holds text, not true or false" \
        in message and "unquoted, YAML reads yes, no, on, off, true and false as booleans" in message
    # the condition as written (YAML's yes and no shown as the booleans they were read as)
    assert message.startswith(f"filter {written.replace('yes', 'true').replace('[no', '[false')}: ")


def test_quoted_values_compare_as_text_and_booleans_with_booleans(index):
    assert search(index, yaml.safe_load("{field: reviewed, in: ['True', 'yes']}")) == ["a", "b"]
    assert search(index, yaml.safe_load("{field: reviewed, eq: 'no'}"), "post") == ["d"]
    assert search(index, {"field": "draft", "eq": True}) == ["a", "c"]
    assert search(index, yaml.safe_load("{field: draft, ne: yes}"), "post") == ["b", "d"]
