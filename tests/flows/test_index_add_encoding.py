"""``tessera index add`` and ``update`` of a file that is not UTF-8 (a Windows or Latin-1 export of real text): its
warning said to "give the file's encoding (the encoding param, tessera ingest --encoding)", an option these commands
lacked, and for standard input it named the temporary copy (``/tmp/tessera-add-.../records.jsonl``), gone once the
command ended. They take ``--encoding`` now, as ``tessera ingest`` does, and say so; BM25 only."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from flows.commands import main
from operators.store import Index

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def records() -> list[dict]:
    """Three documents of the sample corpus, with accented French words put in their texts."""
    with open(REPO / "data" / "sample" / "corpus.jsonl", encoding="utf-8") as lines:
        docs = [json.loads(line) for line, _ in zip(lines, range(3))]
    return [{**d, "text": f"Café, crème brûlée et déjà-vu à Montréal. {d['text']}"} for d in docs]


def _latin1(path: Path, docs: list[dict]) -> bytes:
    data = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode("latin-1", "replace")
    path.write_bytes(data)
    return data


def _texts(idx: Path) -> dict[str, str]:
    _, table = Index.open(idx).columns(["doc_id", "text"])
    return dict(zip(table.column("doc_id").to_pylist(), table.column("text").to_pylist()))


def test_a_file_that_is_not_utf8_is_read_in_the_encoding_given(tmp_path, records, caplog):
    idx, file = tmp_path / "idx", tmp_path / "export.jsonl"
    _latin1(file, records[:2])
    assert main(["index", "add", str(idx), str(file), "--no-dense", "--encoding", "latin-1"]) == 0
    assert not [r for r in caplog.records if "not UTF-8" in r.getMessage()]  # nothing guessed, nothing said
    assert _texts(idx)[records[0]["_id"]] == records[0]["text"]
    _latin1(file, [{**records[1], "text": "Crème fraîche " + records[1]["text"]}])
    assert main(["index", "update", str(idx), str(file), "--encoding", "latin-1"]) == 0
    assert _texts(idx)[records[1]["_id"]].startswith("Crème fraîche Café")


def test_a_guess_names_this_commands_option_and_standard_input_as_stdin(tmp_path, records, caplog, monkeypatch):
    idx = tmp_path / "idx"
    piped = _latin1(tmp_path / "export.jsonl", records)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(piped)))
    assert main(["index", "add", str(idx), "-", "--no-dense"]) == 0
    [guessed] = [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert guessed.startswith("<stdin>: not UTF-8 (byte 0xe9): read as ") and "tessera-add-" not in guessed, guessed
    assert guessed.endswith("if its text looks wrong, give the file's encoding (--encoding)"), guessed


@pytest.mark.parametrize("encoding, said", [
    ("nope", "field '--encoding': unknown encoding 'nope'"),
    ("utf-16", "field '--encoding': encoding 'utf-16' is not read line by line"),
])
def test_an_encoding_it_cannot_read_lines_in_is_refused_before_anything_is_made(tmp_path, records, capsys, encoding,
                                                                                said):
    idx, file = tmp_path / "idx", tmp_path / "export.jsonl"
    _latin1(file, records[:1])
    assert main(["index", "add", str(idx), str(file), "--no-dense", "--encoding", encoding]) == 2
    assert said in capsys.readouterr().err and not idx.exists()
