"""A CSV or JSONL file without records (empty, a CSV's header row alone, a JSONL file of blank lines) among the
files of ``tessera ingest --source`` gave no word, where a text file without text is named ("blank.md: no text: no
document"): a user did not learn that a file held nothing. Each is now named in one warning line, once a run though a
sync reads the source again. Real files and real ingests (local executor, BM25 only: no model loads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.commands import main
from operators.store import Index


def ingest(capsys, source: str, index: Path, *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    status = main(["ingest", "--source", source, "--index", str(index), "--no-dense", "--no-chunk",
                   "--executor", "local", "--quiet", "--json", *extra])
    out = capsys.readouterr().out
    return status, json.loads(out) if status == 0 else {}


@pytest.mark.parametrize("suffix, good, empties", [
    (".csv", "id,title,text\nd1,Bee,Honey bees make honey.\n", {"header.csv": "id,title,text\n", "empty.csv": ""}),
    (".jsonl", '{"_id": "d1", "title": "Bee", "text": "Honey bees make honey."}\n',
     {"empty.jsonl": "", "blank.jsonl": "\n  \n"}),
], ids=["csv", "jsonl"])
def test_a_file_without_records_is_named_in_one_warning(tmp_path, monkeypatch, capsys, caplog, suffix, good, empties):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / f"good{suffix}").write_text(good)
    for name, text in empties.items():
        (folder / name).write_text(text)
    index = tmp_path / "idx"
    status, report = ingest(capsys, str(folder / f"*{suffix}"), index)
    assert status == 0 and report["docs"] == 1, report
    for name in empties:
        assert caplog.text.count(f"{name}: no records: no document") == 1, caplog.text
    assert "good" not in caplog.text, caplog.text
    assert Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist() == ["d1"]
    (folder / f"more{suffix}").write_text(good.replace("d1", "d2"))
    caplog.clear()
    status, report = ingest(capsys, str(folder / f"*{suffix}"), index, "--sync")  # reads the source twice
    assert status == 0, report
    for name in empties:
        assert caplog.text.count(f"{name}: no records: no document") == 1, caplog.text
