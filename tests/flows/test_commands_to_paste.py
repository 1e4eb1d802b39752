"""A command a message tells the user to run names their paths shell-quoted: under ``/home/Zoë's docs`` it read
``tessera ingest --source /home/Zoë's docs/corpus.jsonl --index NAME``, which a shell splits at the space and the
quote (an unfinished string), so the pasted command failed or read another path."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from flows.commands import main


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    docs = tmp_path / "Zoë's docs #1"
    docs.mkdir()
    (docs / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"honey bees {i}"}) + "\n"
                                               for i in range(3)))
    return docs


def _pasted(capsys, *args: str) -> list[str]:
    """The command the error line of ``tessera ARGS`` says to run, as a shell splits it."""
    capsys.readouterr()
    assert main(list(args)) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    command = re.search(r"`(tessera [^`]*)`|: (tessera ingest --source .*) --index \.\.\.\)", line)
    assert command, line
    return shlex.split(command.group(1) or command.group(2))


def test_index_info_of_a_corpus_file_a_folder_of_files_and_no_index(folder, capsys):
    corpus = str(folder / "corpus.jsonl")
    assert _pasted(capsys, "index", "info", corpus) == ["tessera", "ingest", "--source", corpus, "--index", "NAME"]
    assert _pasted(capsys, "index", "info", str(folder)) == ["tessera", "ingest", "--source", str(folder),
                                                             "--index", "NAME"]
    missing = str(folder / "idx")
    assert _pasted(capsys, "index", "info", missing) == ["tessera", "ingest", "--source", "FILE", "--index", missing]


def test_index_add_of_a_folder_says_to_ingest_it(folder, capsys):
    index = str(folder / "idx")
    assert main(["index", "add", index, str(folder / "corpus.jsonl"), "--no-dense"]) == 0
    assert _pasted(capsys, "index", "add", index, str(folder)) == ["tessera", "ingest", "--source", str(folder)]


def test_ingest_replace_of_a_committed_source_names_the_update(folder, capsys):
    args = ["ingest", "--source", str(folder / "corpus.jsonl"), "--index", str(folder / "idx"), "--no-dense",
            "--quiet"]
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--replace"]) == 0
    update = capsys.readouterr().err.split("to replace the index's copies with these documents: ", 1)[1].strip()
    assert shlex.split(update) == ["tessera", "index", "update", str(folder / "idx"), "FILE.jsonl"]
