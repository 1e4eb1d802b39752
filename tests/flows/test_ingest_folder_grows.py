"""``tessera ingest`` of a folder that gained files since it was ingested: the new files are added, whatever their
names, and the documents already in the index are neither ingested again nor changed; a file removed or changed
since is refused, naming it; a file ingested alone and then its folder are one source; an interrupted run over
the grown folder resumes. Real files and real ingests (local executor, BM25 only: no model loads), the command
run in-process as a user runs it (in its own process where it must crash)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flows.commands import main
from operators.store import Index

TESSERA = Path(sys.executable).with_name("tessera")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def folder(tmp_path, pdf_writer) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf_writer(folder / "huia.pdf", ["Huia were wattlebirds of the North Island."])
    pdf_writer(folder / "kea.pdf", ["Kea are alpine parrots.", "Kea are curious about cars."])
    return folder


def ingest(capsys, source: Path, index: Path, *extra: str) -> tuple[int, str, str]:
    """The command's status, and the report's docs and shards already done (stderr when it failed)."""
    capsys.readouterr()
    status = main(["ingest", "--source", str(source), "--index", str(index), "--no-dense", "--no-chunk",
                   "--executor", "local", "--quiet", "--shard-size", "2", *extra])
    out, err = capsys.readouterr()
    found = re.search(r": (\d+)\s+docs\s+->.*?\((\d+)\s+already\s+done", out, re.S)  # a long path wraps the line
    return (status, found.group(1), found.group(2)) if found else (status, out, err)


def doc_ids(index: Path) -> list[str]:
    ids = Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()
    assert len(ids) == len(set(ids)), ids  # no document twice (one chunk each: --no-chunk)
    return sorted(ids)


def test_files_added_before_and_between_those_ingested_are_added_and_the_others_stay(tmp_path, home, folder,
                                                                                     capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index) == (0, "3", "0")  # shards: huia-p1 kea-p1 | kea-p2
    (folder / "a.txt").write_text("Tui sing at dawn in the bush.\n")  # sorts before every file
    assert ingest(capsys, folder, index) == (0, "1", "2")  # appended after kea-p2, as shard 1's continuation
    (folder / "ibis.md").write_text("# Ibis\n\nSacred ibis wade in marshes.\n")  # sorts between huia and kea
    assert ingest(capsys, folder, index) == (0, "1", "3")
    assert ingest(capsys, folder, index) == (0, "0", "4")  # nothing new: nothing read again
    assert doc_ids(index) == ["a.txt", "huia-p1", "ibis.md", "kea-p1", "kea-p2"]
    assert Index.open(index).search_bm25(["wade in marshes"], k=1)[0].docnos[0] == "ibis.md"


def test_a_removed_or_changed_file_is_refused_naming_it_and_the_index_keeps_its_documents(tmp_path, home, folder,
                                                                                          capsys, pdf_writer):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0
    (folder / "huia.pdf").unlink()
    status, _, err = ingest(capsys, folder, index)
    assert status == 2 and f"removed: {folder / 'huia.pdf'}" in err, err
    assert "ingest it with --sync to make the index follow it, restore the source, or ingest it into a new index" \
        in err, err
    pdf_writer(folder / "huia.pdf", ["Huia are extinct."])  # back, with other text
    status, _, err = ingest(capsys, folder, index)
    assert status == 2 and f"changed: {folder / 'huia.pdf'}" in err and "removed:" not in err, err
    assert "documents added to one file of several take the places of the files read after it: add them as a new " \
           "file" in err, err  # its only advice was a new index
    assert doc_ids(index) == ["huia-p1", "kea-p1", "kea-p2"]
    assert "wattlebirds" in Index.open(index).documents(["huia-p1"]).column("text")[0].as_py()


def test_a_file_ingested_alone_and_then_its_folder_are_one_source(tmp_path, home, folder, capsys):
    """The folder reads the file first, in the order the file's own source read it, and appends the others."""
    index = tmp_path / "idx"
    assert ingest(capsys, folder / "kea.pdf", index) == (0, "2", "0")
    assert ingest(capsys, folder, index) == (0, "1", "1")
    assert doc_ids(index) == ["huia-p1", "kea-p1", "kea-p2"]


def test_a_new_file_ingested_alone_before_its_folder_is_refused_saying_to_replace_it(tmp_path, home, folder, capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0
    (folder / "a.txt").write_text("Tui sing at dawn in the bush.\n")
    assert ingest(capsys, folder / "a.txt", index) == (0, "1", "0")
    status, _, err = ingest(capsys, folder, index)  # its document is live, under the file's own source
    assert status != 0 and "['a.txt'] (1 in all) are already live" in err and "--replace" in err, err
    assert ingest(capsys, folder, index, "--replace") == (0, "1", "2")
    assert ingest(capsys, folder, index) == (0, "0", "3")
    assert doc_ids(index) == ["a.txt", "huia-p1", "kea-p1", "kea-p2"]


#: A file with something to warn of (its name, content, the warning's start), and the same file changed.
FILES_WARNED_OF = {
    "front matter": ("kea.md", b"---\ndocno: k1\n---\n# Kea\n\nKea are alpine parrots.\n",
                     b"---\ndocno: k1\n---\n# Kea\n\nKea are curious parrots.\n",
                     "kea.md: front matter field(s) docno left out"),
    "guessed encoding": ("kea.txt", "Kea: très curieux, déjà vu à Arthur's Pass.".encode("cp1252"),
                         "Kea: très curieux, déjà vu à Porters Pass.".encode("cp1252"),
                         "kea.txt: not UTF-8 (byte 0xe8 at byte 8): read as cp1252"),
    "stray byte": ("kea.txt", "Kea: très curieux, déjà vu à Arthur's Pass.".encode() + b" \xff",
                   "Kea: très curieux, déjà vu à Porters Pass.".encode() + b" \xff",
                   "kea.txt: UTF-8 text with a byte that is not UTF-8 (0xff at byte"),
}


@pytest.mark.parametrize("what", FILES_WARNED_OF)
def test_a_files_warning_is_said_when_it_is_ingested_not_at_each_ingest_of_its_folder(tmp_path, home, capsys,
                                                                                     caplog, what):
    """Staging reads a grown folder's files again to compare them with the finished shards: a file's front matter,
    encoding or stray-byte warning was said at every ingest of its folder; now when its document is ingested (or
    again, by a sync)."""
    name, content, changed, warning = FILES_WARNED_OF[what]
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / name).write_bytes(content)
    index = tmp_path / "idx"

    def warned() -> list[str]:
        said = [record.getMessage() for record in caplog.records if record.getMessage().startswith(name)]
        caplog.clear()
        return said

    caplog.set_level("WARNING", logger="tessera")
    assert ingest(capsys, folder, index) == (0, "1", "0")
    assert [line[:len(warning)] for line in warned()] == [warning]
    (folder / "tui.md").write_text("# Tui\n\nTui sing at dawn.\n")
    assert ingest(capsys, folder, index) == (0, "1", "1")  # the first file is read again, to compare: no warning
    assert warned() == []
    (folder / name).write_bytes(changed)
    assert ingest(capsys, folder, index, "--sync") == (0, "2", "0")  # ingested again: warned of again
    assert [line[:len(warning)] for line in warned()] == [warning]
    assert doc_ids(index) == [name, "tui.md"]


def test_a_jsonl_file_added_to_a_glob_before_the_one_ingested_is_added(tmp_path, home, capsys):
    (tmp_path / "m.jsonl").write_text("".join(json.dumps({"_id": f"m{i}", "text": f"moa {i}"}) + "\n"
                                              for i in range(3)))
    index = tmp_path / "idx"
    assert ingest(capsys, tmp_path / "*.jsonl", index) == (0, "3", "0")
    (tmp_path / "a.jsonl").write_text(json.dumps({"_id": "a0", "text": "albatross"}) + "\n")
    assert ingest(capsys, tmp_path / "*.jsonl", index) == (0, "1", "2")
    assert doc_ids(index) == ["a0", "m0", "m1", "m2"]


@pytest.mark.process
def test_an_interrupted_ingest_of_a_grown_folder_resumes(tmp_path, home, folder, capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0
    (folder / "a.txt").write_text("Tui sing at dawn in the bush.\n")
    (folder / "b.txt").write_text("Bellbirds sing too.\n")
    crashed = subprocess.run(  # a.txt continues shard 1, b.txt is shard 2: the run dies before committing it
        [str(TESSERA), "ingest", "--source", str(folder), "--index", str(index), "--no-dense", "--no-chunk",
         "--executor", "local", "--quiet", "--shard-size", "2"], capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TESSERA_HOME": str(home),
             "TESSERA_FAULT": "crash_after_write:2"})
    assert crashed.returncode == 75, crashed.stderr
    assert doc_ids(index) == ["a.txt", "huia-p1", "kea-p1", "kea-p2"]
    assert ingest(capsys, folder, index) == (0, "1", "3")
    assert doc_ids(index) == ["a.txt", "b.txt", "huia-p1", "kea-p1", "kea-p2"]
