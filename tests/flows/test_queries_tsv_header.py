"""A ``.tsv`` queries file's header: a first line that names an id column and a text column the queries reader
knows (``qid``, ``_id``, ``query_id``, ``id``; ``query``, ``text``) is skipped, so ``tessera run bm25 --queries
FILE.tsv`` does not search for a query ``text`` with the id ``query_id``. Such a line further down, or a first
line of names the reader does not know, is a query. ``tessera`` runs in-process on a real BM25 index of three
documents."""

from __future__ import annotations

import json

import pytest

from tests.flows.test_cli import tessera_in_process

DOCS = [{"_id": "d1", "text": "honey bees make honey in hives"},
        {"_id": "d2", "text": "opera singers train their voices"},
        {"_id": "d3", "text": "gothic cathedrals have flying buttresses"},
        {"_id": "d4", "text": "a question is the text of a query"}]  # a header read as a query finds it


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tsv_header")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return folder / "home", folder / "index", corpus


def searched(index, monkeypatch, capsys, tmp_path, body: str) -> list[tuple[str, str]]:
    """The (qid, query) pairs ``tessera run bm25`` searched for, reading ``body`` as a .tsv queries file."""
    home, folder, corpus = index
    if not (folder / "manifest.json").exists():
        tessera_in_process(monkeypatch, capsys, "index", "add", str(folder), str(corpus), "--no-dense", home=home)
    queries = tmp_path / "queries.tsv"
    queries.write_text(body)
    proc = tessera_in_process(monkeypatch, capsys, "run", "bm25", "--index", str(folder), "--queries", str(queries),
                              "--no-cache", "--quiet", "--json", home=home)
    return sorted({(row["qid"], row["query"]) for row in json.loads(proc.stdout)["rows"]})


@pytest.mark.parametrize("header", ["query_id\ttext", "qid\tquery", "_id\ttext", "id\tquery"])
def test_a_first_line_of_known_column_names_is_a_header(index, monkeypatch, capsys, tmp_path, header):
    assert searched(index, monkeypatch, capsys, tmp_path, f"{header}\nq1\thoney bees\nq2\topera singers\n") == [
        ("q1", "honey bees"), ("q2", "opera singers")]


def test_such_a_line_elsewhere_and_unknown_names_are_queries(index, monkeypatch, capsys, tmp_path):
    assert searched(index, monkeypatch, capsys, tmp_path, "q1\thoney bees\nquery_id\ttext\n") == [
        ("q1", "honey bees"), ("query_id", "text")]
    assert searched(index, monkeypatch, capsys, tmp_path, "question_id\tquestion\nq1\thoney bees\n") == [
        ("q1", "honey bees"), ("question_id", "question")]
