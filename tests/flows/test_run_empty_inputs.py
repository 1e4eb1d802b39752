"""``tessera run`` over inputs that hold nothing: a queries file with no query is refused (exit 2, one line); a flow
whose steps start at a JSONL or CSV source named a JSONL file without records among others without a word (CSV's
were named), and a source that read no document at all printed "0 rows" and exited 0, as if done. Real files, real
runs of the CLI in-process (local executor, no model)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.commands import main

GOOD = {".csv": "id,title,text\nd1,Bee,Honey bees make honey.\n",
        ".jsonl": '{"_id": "d1", "title": "Bee", "text": "Honey bees make honey."}\n'}
EMPTY = {".csv": {"header.csv": "id,title,text\n", "empty.csv": ""},
         ".jsonl": {"empty.jsonl": "", "blank.jsonl": "\n  \n"}}


def reading(tmp_path: Path, suffix: str, path: Path) -> str:
    """A flow of one step that reads ``path`` with the source of ``suffix``."""
    spec = tmp_path / "read.yaml"
    spec.write_text(yaml.safe_dump({"name": "read", "steps": {"read": {"op": f"sources.{suffix[1:]}",
                                                                        "params": {"path": str(path)}}}}))
    return str(spec)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_file_without_records_among_others_is_named_in_one_warning(tmp_path, capsys, caplog, suffix):
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / f"good{suffix}").write_text(GOOD[suffix])
    for name, text in EMPTY[suffix].items():
        (folder / name).write_text(text)
    assert main(["run", reading(tmp_path, suffix, folder), "--no-cache", "--quiet"]) == 0
    for name in EMPTY[suffix]:
        assert caplog.text.count(f"{name}: no records: no document") == 1, caplog.text
    assert "good" not in caplog.text and "tessera: error" not in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
@pytest.mark.parametrize("whole", ["one file", "a folder"])
def test_a_source_that_reads_no_document_is_an_error_naming_its_step_and_path(tmp_path, capsys, suffix, whole):
    folder = tmp_path / "records"
    folder.mkdir()
    for name, text in EMPTY[suffix].items():
        (folder / name).write_text(text)
    path = folder / next(iter(EMPTY[suffix])) if whole == "one file" else folder
    capsys.readouterr()
    assert main(["run", reading(tmp_path, suffix, path), "--no-cache", "--quiet"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tessera: error")]
    assert errors == [f"tessera: error: step 'read' (sources.{suffix[1:]}) read no documents from {path}: no records "
                      "there (an empty file, blank lines or a header row alone), or every one was skipped as bad; the "
                      "flow ran on nothing"], errors


@pytest.mark.parametrize("text", ["", "\n \n"])
def test_a_queries_file_without_a_query_is_refused_in_one_line(tmp_path, capsys, text):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(text)
    capsys.readouterr()
    assert main(["run", "bm25", "--queries", str(queries), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == f"tessera: error: field '--queries': {queries} holds no queries"
