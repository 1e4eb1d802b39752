"""``tessera ingest --encoding`` is checked as the read step's source declares it reads its files
(``Source.reads_lines``), not by its name: a plugin source that decodes each file whole takes UTF-16, as
``sources.files`` does, and a source of lines (JSONL) refuses it, naming ``encoding``. Real files in tmp_path, a
real plugin package (``TESSERA_OPERATORS``), BM25 only, in-process."""

from __future__ import annotations

import pytest

from flows.ingestion import ingest
from flows.ingestion.errors import IngestError
from operators.errors import ParamsError
from operators.registry import create
from operators.store import Index
from tests.operators.test_plugins import fresh_registry, load_plugin  # noqa: F401

WHOLE = '''\
"""A source of one text file, decoded whole."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from operators.base import Source


class WholeText(Source):
    """The file's text as one document."""

    name = "mylab.whole_text"
    reads_lines = False

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str
        encoding: str | None = None

    def read(self, split):
        with open(self.params.path, encoding=self.params.encoding or "utf-8") as f:
            yield pa.table({"docno": ["whole"], "text": [f.read()]})
'''


@pytest.fixture
def whole_text(tmp_path, monkeypatch, fresh_registry):  # noqa: F811 - the imported fixture
    load_plugin(tmp_path, monkeypatch, {"whole": WHOLE}, "whole")


def test_a_source_that_reads_whole_files_takes_utf16_and_one_of_lines_refuses_it(tmp_path, whole_text):
    text = "Zażółć gęślą jaźń: UTF-16 read whole."
    path = tmp_path / "note.txt"
    path.write_bytes(text.encode("utf-16"))
    report = ingest({"op": "mylab.whole_text", "params": {"path": str(path)}}, tmp_path / "idx", executor="local",
                    settings={"dense": False}, chunk=False, progress=False, encoding="utf-16")
    assert (report.docs, report.failures) == (1, 0)
    [row] = Index.open(tmp_path / "idx").columns(["doc_id", "text"])[1].to_pylist()
    assert row == {"doc_id": "whole", "text": text}

    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_bytes('{"_id": "a", "text": "alpha"}\n'.encode("utf-16"))
    with pytest.raises(IngestError, match="encoding='utf-16': encoding 'utf-16' is not read line by line") as err:
        ingest(jsonl, tmp_path / "lines", executor="local", settings={"dense": False}, chunk=False, progress=False,
               encoding="utf-16")
    assert err.value.field == "encoding"
    with pytest.raises(ParamsError, match="not read line by line") as err:  # the param, in a spec: the same rule
        create("sources.jsonl", {"path": str(jsonl), "encoding": "utf-16"})
    assert err.value.field == "params.encoding"
    assert create("mylab.whole_text", {"path": str(path), "encoding": "UTF-16"}).params.encoding == "UTF-16"
