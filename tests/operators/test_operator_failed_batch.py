"""An exception a step's own code raises names the rows it was given (``operators/failed_batch.py``): before, a
plugin author read ``step 'score', operator 'mylab.ratio': ZeroDivisionError: division by zero (at ...)`` and
reran every query to find the one that failed. The message now names the batch's qids (three, then how many more) or,
for rows without a qid, how many and the first docno, never a row's text. The plugin is a real package written into
``tmp_path`` and registered through ``TESSERA_OPERATORS``, run in real flows (BM25 over a corpus file; a JSONL
source)."""

from __future__ import annotations

import json

import pytest

from operators.errors import OperatorError
from tests.operators.test_operator_output import flow
from tests.operators.test_plugins import CORPUS, fresh_registry, load_plugin  # noqa: F401 - a fixture

FAILING = '''\
"""Operators that fail on some rows, as a first try does."""

import pyarrow as pa

from operators.base import Operator
from operators.tables import qid_groups, set_column


class Ratio(Operator):
    """Divide by the number of query words that are not 'opera'."""

    name = "mylab.ratio"
    scope = "query"

    def produces(self):
        return {"ratio": "chip"}

    def transform(self, table):
        ratios = []
        for _, rows in qid_groups(table):
            words = [w for w in rows.column("query")[0].as_py().split() if w != "opera"]
            ratios += [1 / len(words)] * rows.num_rows
        return set_column(table, "ratio", pa.array(ratios, pa.float64()))


class Measurer(Operator):
    """Divide each document's length by its title's, which one document lacks."""

    name = "mylab.measure"

    def produces(self):
        return {"measure": "chip"}

    def transform(self, table):
        values = []
        for text, title in zip(table.column("text").to_pylist(), table.column("title").to_pylist()):
            values.append(len(text) / len(title))
        return set_column(table, "measure", pa.array(values, pa.float64()))
'''


@pytest.fixture
def failing(tmp_path, monkeypatch, fresh_registry):  # noqa: F811 - the imported fixture
    root = load_plugin(tmp_path, monkeypatch, {"failing": FAILING}, "failing")
    return root


@pytest.mark.parametrize("queries, held", [
    (["opera"], "query '1'"),
    (["honey bees", "opera"], "queries '1', '2'"),
    (["honey", "bees", "wasps", "flowers", "opera"], "queries '1', '2', '3' and 2 more"),
])
def test_a_transform_that_raises_names_the_queries_of_its_batch(failing, tmp_path, queries, held):
    with pytest.raises(OperatorError) as err:
        flow(tmp_path, ("score", "mylab.ratio", {})).run(queries)
    assert (err.value.step, err.value.op) == ("score", "mylab.ratio")
    message = err.value.message
    assert message.startswith("ZeroDivisionError: division by zero (at tessera_mylab/failing.py:"), message
    assert message.endswith(f", in transform); its batch held {held}"), message
    assert "opera" not in message and "honey" not in message  # ids, never a query's or a document's text


def test_rows_without_a_qid_are_named_by_their_count_and_first_docno(failing, tmp_path):
    from flows.api import Flow

    corpus = tmp_path / "docs.jsonl"
    docs = [{"docno": doc["_id"], "title": doc["title"], "text": doc["text"]} for doc in CORPUS]
    docs[1]["title"] = ""
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    spec = {"docs": {"op": "sources.jsonl", "params": {"path": str(corpus)}}, "measure": {"op": "mylab.measure"}}
    with pytest.raises(OperatorError) as err:
        Flow.load({"name": "measured", "steps": spec}).run("unused")
    assert (err.value.step, err.value.op) == ("measure", "mylab.measure")
    assert err.value.message.endswith(", in transform); its batch held 3 rows, the first docno 'd1'"), err.value.message
    assert "Wasps" not in err.value.message
