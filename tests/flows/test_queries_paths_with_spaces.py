"""A queries file or folder whose path holds a space (``/home/Zoë Smith/...``) is read or refused as a path: it was
searched as one query's text, the file or folder unread and the run exiting 0 with results for the path's words."""

from __future__ import annotations

import json

import pytest

from flows.commands import main
from operators.errors import SpecError


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    beir = tmp_path / "Zoë Smith" / "my beir"
    beir.mkdir(parents=True)
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "classical music"}) + "\n")
    return beir


def _error(capsys, bm25_index, queries: str) -> str:
    capsys.readouterr()
    assert main(["run", "bm25", "--index", str(bm25_index), "--queries", queries, "--quiet", "--no-cache"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def test_a_folder_or_a_missing_file_with_a_space_is_refused_as_a_path(bm25_index, folder, capsys):
    said = _error(capsys, bm25_index, f"{folder}/")
    assert said == (f"tessera: error: field '--queries': {folder}/ is a folder, not a queries file; did you mean "
                    f"{folder / 'queries.jsonl'}?")
    missing = folder.parent / "queries.jsonl"
    said = _error(capsys, bm25_index, str(missing))
    assert said == f"tessera: error: field '--queries': queries file not found: {missing}"


def test_the_file_itself_is_read_and_flow_run_says_to_read_it(bm25_index, folder, capsys):
    from flows.api import Flow

    capsys.readouterr()
    assert main(["run", "bm25", "--index", str(bm25_index), "--queries", str(folder / "queries.jsonl"), "--json",
                 "--no-cache", "--quiet"]) == 0
    assert {row["qid"] for row in json.loads(capsys.readouterr().out)["rows"]} == {"q1"}
    with pytest.raises(SpecError, match="is a file's name: Flow.run takes the queries themselves"):
        Flow.load("bm25", index=bm25_index).run(str(folder / "queries.jsonl"))


def test_a_query_with_spaces_and_a_slash_is_still_a_query():
    from flows.queries import read_queries

    for text in ("honey bees and/or wasps", "what is in /etc/hosts", "is ./configure a script"):
        assert read_queries(text).to_pylist() == [{"qid": "1", "query": text}]
