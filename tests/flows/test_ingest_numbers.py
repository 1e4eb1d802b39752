"""``tessera ingest`` keeps a JSON number used as an id or a text as it was written, as the JSONL source does: its
own line reader (``flows.ingestion.records``) rewrote ``1e2`` as ``100.0``, ``1.10`` as ``1.1`` and ``1E400`` and
``2E400`` both as ``Infinity``, so two of these records were left out as duplicates. The command in-process, a real
index (BM25 only)."""

from __future__ import annotations

import pytest

from tests.flows.test_ingest_folder_grows import doc_ids, ingest


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))


def test_numbers_as_ids_are_kept_as_written_and_none_is_a_duplicate(tmp_path, capsys):
    source = tmp_path / "numbers.jsonl"
    source.write_text('{"_id": 1e2, "text": "a"}\n{"_id": 1.1, "text": "b"}\n{"_id": 1.10, "text": "c"}\n'
                      '{"_id": 1E400, "text": "d"}\n{"_id": 2E400, "text": "e"}\n{"_id": "n1", "text": 1e2}\n',
                      encoding="utf-8")
    status, docs, _ = ingest(capsys, source, tmp_path / "idx")
    assert (status, docs) == (0, "6")
    assert doc_ids(tmp_path / "idx") == ["1.1", "1.10", "1E400", "1e2", "2E400", "n1"]
