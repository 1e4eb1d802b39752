"""Reading rows of an index that holds a metadata type conflict names the column, the shards and the repair.

Such an index (a shard committed before commits checked column types) made ``tessera index documents`` fail with
"internal error: ArrowTypeError" and a search that read rows of both shards with "ArrowTypeError: Unable to merge".
"""

from __future__ import annotations

import pytest

from flows.commands import main
from operators.store import Index, IndexSettings
from operators.store.errors import ColumnTypeConflictError


@pytest.fixture
def conflicted(tmp_path, sample_docs, make_chunks, commit_unchecked) -> tuple[Index, str, str]:
    """An index whose ``year`` is int64 in one shard and string in another, and the two shard ids."""
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    ints = index.add(make_chunks(sample_docs[:5], year=list(range(5)))).id
    info = commit_unchecked(index, "old-add", make_chunks(sample_docs[5:10], year=[f"y{i}" for i in range(5)]))
    return Index.open(index.path), ints, info.id


def _names_the_conflict(message: str, ints: str, strings: str) -> None:
    assert "column 'year' is " in message and "Arrow" not in message
    assert f"int64 in shard {ints!r}" in message and f"string in shard {strings!r}" in message
    assert "tessera index delete" in message and "tessera index compact" in message


def test_listing_documents_names_the_conflict(conflicted, capsys):
    index, ints, strings = conflicted
    assert main(["index", "documents", str(index.path)]) == 2
    err = capsys.readouterr().err
    _names_the_conflict(err, ints, strings)
    assert "internal error" not in err


def test_reading_the_rows_of_hits_from_both_shards_names_the_conflict(conflicted, sample_docs, capsys):
    index, ints, strings = conflicted
    hits = index.search_bm25([sample_docs[1]["title"] + " " + sample_docs[7]["title"]], k=10)
    with pytest.raises(ColumnTypeConflictError) as raised:
        index.documents_of(hits)
    _names_the_conflict(raised.value.message, ints, strings)
    assert raised.value.field == "year"
    query = sample_docs[1]["title"] + " " + sample_docs[7]["title"]
    assert main(["run", "bm25", "--index", str(index.path), "--queries", query, "--no-cache"]) == 2
    _names_the_conflict(capsys.readouterr().err, ints, strings)
    # rows of one shard still read
    assert index.documents_of(index.search_bm25([sample_docs[1]["title"]], k=1)).num_rows == 1
