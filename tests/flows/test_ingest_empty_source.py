"""``tessera ingest`` of a source that holds no documents (a CSV with its header line alone, an empty JSONL file)
says so on stderr, naming the source, instead of a silent "0 docs" report; a rerun of a source already ingested,
which has nothing new, says nothing of the kind. Real files and real ingests (local executor, BM25 only), the
command run in-process as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.commands import main


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def ingest(capsys, source: Path, index: Path, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["ingest", "--source", str(source), "--index", str(index), "--no-dense", "--executor", "local",
                   "--quiet", *extra])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("name, text", [("it.csv", "id,title,text\n"), ("it.jsonl", "")])
def test_a_source_with_no_documents_is_a_warning_naming_it(tmp_path, capsys, name, text):
    source = tmp_path / name
    source.write_text(text)
    status, out, err = ingest(capsys, source, tmp_path / "idx")
    assert status == 0 and "0 docs -> 0 chunks" in out, out + err
    warning, = [line for line in err.splitlines() if line.startswith("tessera: warning:")]
    assert f"--source {source} holds no documents" in warning and "nothing was ingested" in warning, err
    status, out, err = ingest(capsys, source, tmp_path / "idx", "--json")  # stdout stays one JSON document
    assert status == 0 and json.loads(out)["docs_total"] == 0 and "holds no documents" in err


def test_a_rerun_with_nothing_new_and_a_source_with_documents_say_nothing_of_the_kind(tmp_path, capsys):
    source = tmp_path / "it.csv"
    source.write_text("id,title,text\nd1,Bees,Honey bees dance.\n")
    for done in ("0", "1"):  # the first ingest, then a rerun that finds its shard done
        status, out, err = ingest(capsys, source, tmp_path / "idx")
        assert status == 0 and f"({done} already done)" in out and "warning" not in err, out + err
