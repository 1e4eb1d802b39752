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


@pytest.fixture
def unfit(tmp_path, commit_unchecked) -> Index:
    """An index whose ``n`` is int64 in shard ``s0`` and uint64 in ``s1``, one of them beyond int64 (the type the
    two merge to): committed before commits checked that the values fit."""
    import pyarrow as pa

    def chunks(ids: list[str], n: pa.Array) -> pa.Table:
        return pa.table({"docno": ids, "doc_id": ids, "text": [f"honey {i}" for i in ids], "n": n})

    index = Index.create(tmp_path / "unfit", IndexSettings(dense=False))
    index.add(chunks(["a", "b"], pa.array([5, 1], pa.int64())), shard_id="s0")
    commit_unchecked(index, "s1", chunks(["c", "d"], pa.array([2 ** 64 - 1, 7], pa.uint64())))
    return Index.open(index.path)


def _names_the_unfit_values(message: str) -> None:
    assert ("column 'n' is uint64 in shard 's1' and int64 in shard 's0'; these merge to int64, which cannot hold every "
            "value of shard 's1' (Integer value 18446744073709551615 not in range") in message, message
    assert "delete the documents whose 'n' does not fit int64 (tessera index delete)" in message
    assert "tessera index compact" in message


def test_values_that_do_not_fit_the_merged_type_are_named_by_every_read_of_both_shards(unfit, capsys):
    """Rows of both shards (a search's hits, a listing), a pre-filter (Arrow fails on s1's values under the merged
    int64), a compaction: each names the column and the values (it was Arrow's "Integer value ... not in range")."""
    import pyarrow as pa
    import pyarrow.compute as pc

    with pytest.raises(ColumnTypeConflictError) as raised:
        unfit.documents_of(unfit.search_bm25(["honey"], k=10))
    _names_the_unfit_values(raised.value.message)
    assert raised.value.field == "n"
    with pytest.raises(ColumnTypeConflictError) as raised:
        unfit.search_bm25(["honey"], k=10, where=pc.field("n") > pa.scalar(3, pa.int64()))
    _names_the_unfit_values(raised.value.message)
    with pytest.raises(ColumnTypeConflictError) as raised:
        unfit.compact()
    _names_the_unfit_values(raised.value.message)
    assert main(["index", "documents", str(unfit.path)]) == 2
    err = capsys.readouterr().err
    _names_the_unfit_values(err)
    assert "internal error" not in err and len(err.strip().splitlines()) == 1


def test_deleting_the_values_that_do_not_fit_and_compacting_repairs_it(unfit):
    unfit.delete(doc_ids=["c"])
    assert sorted(unfit.columns(["n"])[1].column("n").to_pylist()) == [1, 5, 7]
    unfit.compact()
    after = Index.open(unfit.path)
    rows = after.documents_of(after.search_bm25(["honey"], k=10))
    assert rows.schema.field("n").type == after.docs_schema().field("n").type
    assert sorted(rows.column("n").to_pylist()) == [1, 5, 7]
