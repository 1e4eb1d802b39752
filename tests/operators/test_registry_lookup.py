"""Looking up one built-in operator by its name imports its module alone, where no plugin can register operators;
where one can, every lookup goes through the whole discovery, which checks that no plugin takes a built-in's name
(tests/operators/test_plugins.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

LOOKUP = """
import json, sys
from operators import create
op = create(sys.argv[1], step_id="s")
print(json.dumps({"class": type(op).__name__,
                  "categories": sorted({m.split(".")[1] for m in sys.modules if m.count(".") >= 2
                                        and m.startswith("operators.") and m.split(".")[1] not in
                                        ("llm", "models", "store", "testing")})}))
"""


def _run(name: str, **env: str) -> subprocess.CompletedProcess:
    """``LOOKUP`` of ``name`` in a fresh process, from the repository, with ``env`` added to this one's."""
    return subprocess.run([sys.executable, "-c", LOOKUP, name], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def _lookup(name: str) -> dict:
    done = _run(name)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.process
def test_a_builtin_looked_up_by_its_name_imports_its_own_category_alone():
    assert _lookup("analyze.word_count") == {"class": "WordCounter", "categories": ["analyze"]}


@pytest.mark.parametrize("name", ["embed", "DocumentSummarizerStep"])
@pytest.mark.process
def test_an_alias_is_found_by_the_whole_discovery(name):
    """An alias is no module's name: the lookup imports every category to find it."""
    found = _lookup(name)
    assert len(found["categories"]) > 5


@pytest.mark.process
def test_a_plugin_module_turns_the_lookup_by_module_off(tmp_path):
    (tmp_path / "my_plugin_ops.py").write_text("X = 1\n")  # a module that registers nothing: the discovery says so
    done = _run("analyze.word_count", TESSERA_OPERATORS="my_plugin_ops",
                PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    assert done.returncode != 0 and "my_plugin_ops" in done.stderr and "defines no Operator" in done.stderr


@pytest.mark.parametrize("name, close", [
    ("bm2", "did you mean 'retrieve.bm25'?"),  # the name after the category (listed all 54 operators before)
    ("retrieve.bm2", "did you mean 'retrieve.bm25'?"),  # quoted as a param's: 'k'; corpus_bm25 is no typo of it
    ("retrieve.bm52", "did you mean 'retrieve.bm25'?"),  # not 'retrieve.chroma' too
    ("llm_summariser", "did you mean 'summarize.documents'?"),  # an alias's spelling
    ("ingest.chunk", "did you mean 'preprocess.chunk'?"),  # another category's name: it suggested nothing
    ("rerank.bm25", "did you mean 'retrieve.bm25'?"),
])
def test_an_unknown_name_suggests_the_operators_it_is_close_to(name, close):
    from operators.errors import UnknownOperatorError
    from operators.registry import get_operator

    with pytest.raises(UnknownOperatorError) as err:
        get_operator(name)
    assert close in err.value.message and "known operators" not in err.value.message, err.value.message


def test_arguments_of_another_kind_are_refused_naming_them():
    """A bare TypeError or AttributeError from deep inside before: dict(), str.partition, table.column_names."""
    import pandas as pd
    import pyarrow as pa

    from operators.errors import OperatorError, ParamsError, UnknownOperatorError
    from operators.registry import create, get_operator

    for params in ([1], "x"):
        with pytest.raises(ParamsError, match="params are a mapping of param names to values") as err:
            create("analyze.word_count", params)
        assert err.value.field == "params"
    with pytest.raises(UnknownOperatorError, match="an operator's name is a text"):
        get_operator(None)
    op = create("analyze.word_count", {})
    for given, hint in [(None, ""), ({"text": ["a"]}, "pa.table(columns)"), (pd.DataFrame({"text": ["a"]}),
                                                                            "pa.Table.from_pandas")]:
        with pytest.raises(OperatorError, match=f"called on a pyarrow Table, not a {type(given).__name__}") as err:
            op(given)
        assert hint in err.value.message
    assert op(pa.table({"text": ["a b"]})).num_rows == 1
