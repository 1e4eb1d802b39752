"""Documents added to an index are cut into passages as the index's own documents were, whichever door they come
through: ``tessera index add``/``update`` stored every record whole, one passage, even into an index ``tessera
ingest`` had cut (a long record then had one vector for its first 256 word pieces), while ``Index.add``/``update``
cut them with the built-in spec's chunker, even into an index ingested ``--no-chunk`` or made by ``index add``, and
with its 200 pieces into one cut into 50. BM25 only, on the sample corpus's longest documents."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from flows.commands import main

REPO = Path(__file__).resolve().parents[2]
SMALL = {"unit": "tokens", "size": 50, "overlap": 8, "tokenizer": "all-MiniLM-L6-v2"}
BM25 = {"settings": {"dense": False}, "progress": False}


@pytest.fixture(scope="module")
def long_docs() -> list[dict]:
    """The sample corpus's five longest documents (1,200 to 2,100 characters: several passages of 50 pieces)."""
    with open(REPO / "data" / "sample" / "corpus.jsonl", encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    return sorted(docs, key=lambda d: -len(d["text"]))[:5]


def _write(path: Path, docs: list[dict]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return str(path)


def _passages(idx: Path) -> dict[str, list[tuple[str, str, int, int]]]:
    """Each document's passages: (docno, text, chunk_index, total_chunks) in order."""
    from operators.store import Index

    _, table = Index.open(idx).columns(["doc_id", "docno", "text", "chunk_index", "total_chunks"])
    found: dict[str, list] = {}
    for row in table.to_pylist():
        found.setdefault(row["doc_id"], []).append((row["docno"], row["text"], row["chunk_index"], row["total_chunks"]))
    return {doc_id: sorted(rows, key=lambda r: r[2] or 0) for doc_id, rows in found.items()}


def _renamed(rows: list[tuple], old: str, new: str) -> list[tuple]:
    return [(docno.replace(old, new, 1), *rest) for docno, *rest in rows]


def test_both_doors_cut_added_documents_as_the_index_was_cut(tmp_path, long_docs):
    from flows.api import Index, ingest

    idx = tmp_path / "idx"
    ingest(_write(tmp_path / "first.jsonl", long_docs[:1]), idx, chunk=SMALL, **BM25)
    cli, py = long_docs[1], long_docs[2]
    assert main(["index", "add", str(idx), _write(tmp_path / "cli.jsonl", [cli])]) == 0
    Index.open(idx).add([py], progress=False)
    # the same texts ingested alone, as the index's first source was: the passages every door should make
    alone = tmp_path / "alone"
    ingest(_write(tmp_path / "both.jsonl", [cli, py]), alone, chunk=SMALL, **BM25)
    expected, got = _passages(alone), _passages(idx)
    assert len(expected[cli["_id"]]) > 3 and len(expected[py["_id"]]) > 3
    assert got[cli["_id"]] == expected[cli["_id"]] and got[py["_id"]] == expected[py["_id"]]

    # an update replaces every passage of the document by its new text's passages, cut alike
    new_text = long_docs[3]["text"]
    assert main(["index", "update", str(idx), _write(tmp_path / "u.jsonl", [{**cli, "text": new_text}])]) == 0
    Index.open(idx).update([{**py, "text": long_docs[4]["text"]}], progress=False)
    got = _passages(idx)
    ingest(_write(tmp_path / "new.jsonl", [{**cli, "text": new_text}, {**py, "text": long_docs[4]["text"]}]),
           tmp_path / "new", chunk=SMALL, **BM25)
    expected = _passages(tmp_path / "new")
    assert got[cli["_id"]] == expected[cli["_id"]] and got[py["_id"]] == expected[py["_id"]]


@pytest.mark.parametrize("made_by", ["ingest --no-chunk", "index add"])
def test_an_index_of_whole_documents_gets_whole_documents_by_both_doors(tmp_path, long_docs, made_by):
    from flows.api import Index

    idx = tmp_path / "idx"
    first = _write(tmp_path / "first.jsonl", long_docs[:1])
    if made_by == "index add":
        assert main(["index", "add", str(idx), first, "--no-dense"]) == 0
    else:
        assert main(["ingest", "--source", first, "--index", str(idx), "--no-chunk", "--no-dense"]) == 0
    assert main(["index", "add", str(idx), _write(tmp_path / "cli.jsonl", [long_docs[1]])]) == 0
    Index.open(idx).add([long_docs[2]], progress=False)
    Index.open(idx).update([{**long_docs[0], "text": long_docs[3]["text"]}], progress=False)
    got = _passages(idx)
    assert Counter({doc_id: len(rows) for doc_id, rows in got.items()}) == Counter(
        {d["_id"]: 1 for d in long_docs[:3]})
    # docno = the id, the whole text (chunk numbers 0 of 1, or none as ingest --no-chunk writes: searches give 0 of 1)
    assert got[long_docs[2]["_id"]][0][:2] == (long_docs[2]["_id"], long_docs[2]["text"])
    assert got[long_docs[0]["_id"]][0][1] == long_docs[3]["text"]


def test_an_explicit_chunk_option_of_index_add_still_wins(tmp_path, long_docs):
    from flows.api import ingest

    index = ingest(_write(tmp_path / "first.jsonl", long_docs[:1]), tmp_path / "idx", chunk=False, **BM25)
    index.add([long_docs[1]], chunk=SMALL, progress=False)
    assert len(_passages(tmp_path / "idx")[long_docs[1]["_id"]]) > 3
