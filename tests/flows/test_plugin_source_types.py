"""A plugin source's batches are checked as an operator's output is (``Source.read_checked``): the executors and
``tessera ingest`` read a source's splits with ``read`` directly, so a plugin whose ``docno`` is an int ran on and
``tessera ingest`` ended in ``internal error: AttributeError: 'int' object has no attribute 'encode'`` (the shard's
digest); a ``read`` that yields a list failed somewhere downstream. Now the read step is named, with the column, its
type and how to write it. A real plugin package (``TESSERA_OPERATORS``), real files, BM25 only, in-process."""

from __future__ import annotations

import pytest

from flows.api import Flow
from flows.commands import main
from flows.ingestion import ingest
from operators.errors import OperatorError
from operators.store import Index
from tests.operators.test_plugins import fresh_registry, load_plugin  # noqa: F401

NOTES = '''\
"""My lab's notes, as a first plugin source writes them."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Source

TEXTS = ["Kiwi lay large eggs.", "Kea are alpine parrots.", "Weta are heavy insects."]


class Notes(Source):
    """Three notes; ``ids`` as the lab's database numbers them (ints) or as text, ``shape`` a table or rows."""

    name = "mylab.notes"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        ids: str = Field("int", description="int or string")
        shape: str = Field("table", description="table or rows")
        slip: str = Field("none", description="none, body (text named body), no_docno, bytes (text), int_title")

    def produces(self) -> dict[str, str]:
        if self.params.slip in ("body", "no_docno"):  # a first plugin declares nothing (the base's {})
            return {}
        return {"docno": "id", "title": "text", "text": "text"}

    def read(self, split):
        ids = [1, 2, 3] if self.params.ids == "int" else ["1", "2", "3"]
        rows = [{"docno": i, "title": t.split()[0], "text": t} for i, t in zip(ids, TEXTS)]
        slip = self.params.slip
        for row, n in zip(rows, range(1, 4)):
            if slip == "body":
                row["body"] = row.pop("text")
            elif slip == "no_docno":
                del row["docno"]
            elif slip == "bytes":
                row["text"] = row["text"].encode()
            elif slip == "int_title":
                row["title"] = n
        yield pa.Table.from_pylist(rows) if self.params.shape == "table" else rows
'''

SAID = ("step 'read', operator 'mylab.notes': read() yielded a column of another type than the data model's: 'docno' "
        "is int64, expected string; write it as pa.array(values, pa.string())")


@pytest.fixture
def notes(tmp_path, monkeypatch, fresh_registry):  # noqa: F811 - the imported fixture
    load_plugin(tmp_path, monkeypatch, {"notes": NOTES}, "notes")
    spec = tmp_path / "ingest.yaml"
    spec.write_text("name: notes_ingest\nsteps:\n  read: {op: mylab.notes}\n"
                    "index_settings: {dense: false, bm25: true}\n")
    return spec


def test_tessera_ingest_of_int_ids_names_the_read_step_and_the_column_not_an_internal_error(tmp_path, notes, capfd):
    assert main(["ingest", "--index", str(tmp_path / "idx"), "--spec", str(notes), "--no-chunk"]) != 0
    err = capfd.readouterr().err
    assert f"tessera: error: {SAID}" in err and "internal error" not in err
    fixed = ingest({"op": "mylab.notes", "params": {"ids": "string"}}, tmp_path / "fixed", executor="local",
                   settings={"dense": False}, chunk=False, progress=False)
    assert (fixed.docs, fixed.failures) == (3, 0)
    assert sorted(Index.open(tmp_path / "fixed").columns(["doc_id"])[1].column("doc_id").to_pylist()) == ["1", "2", "3"]


@pytest.mark.parametrize("params, said", [
    ({}, SAID.split(": ", 1)[1]),
    ({"ids": "string", "shape": "rows"}, "read() yielded a list, not a pyarrow Table (pa.Table.from_pylist(rows)")])
def test_a_flow_that_reads_the_source_names_its_step(notes, params, said):
    flow = Flow.load({"name": "notes", "steps": {"read": {"op": "mylab.notes", "params": params},
                                                 "words": {"op": "analyze.word_count"}}})
    with pytest.raises(OperatorError) as err:
        flow.run()
    assert (err.value.step, err.value.op) == ("read", "mylab.notes")
    assert err.value.message.startswith(said), err.value.message


@pytest.mark.parametrize("slip, said", [
    ("body", "read() yielded no 'text' column (it has docno, title, body); tessera ingest reads documents: 'docno' "
             "(the id, text) and 'text', with 'title' and metadata beside them"),
    ("no_docno", "read() yielded no 'docno' column (it has title, text); tessera ingest reads documents"),
    ("bytes", "read() yielded a column of another type than the data model's: 'text' is binary, expected string"),
    ("int_title", "read() yielded a column of another type than the data model's: 'title' is int64, expected string")])
def test_an_ingest_of_a_batch_that_is_no_documents_names_the_read_step_the_column_and_what_it_has(tmp_path, notes,
                                                                                                  slip, said):
    """Without 'text' the ingest failed as the index's "chunks lack column(s) ['text']", without 'docno' as an
    internal KeyError, and an int title was stored as one: each is now the read step's error, before any shard."""
    with pytest.raises(OperatorError) as err:
        ingest({"op": "mylab.notes", "params": {"ids": "string", "slip": slip}}, tmp_path / "idx", executor="local",
               settings={"dense": False}, progress=False)
    assert (err.value.step, err.value.op) == ("read", "mylab.notes")
    assert err.value.message.startswith(said), err.value.message
