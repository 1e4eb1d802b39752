"""A commit refuses documents whose metadata column merges with the index's to a type that cannot hold every value.

The merge rule (pyarrow's permissive promotion) turns int64 and uint64 into int64, and an integer and a double into
a double. The commit checked the types alone, so a uint64 beyond 2**63-1 beside int64 (or an int64 beyond 2**53
beside doubles) was committed, and every read of rows of both shards then failed with Arrow's "Integer value ...
not in range": searches, post-filters, ``postprocess.filter``, the document listing.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from flows.commands import main
from operators.store import Index, IndexSettings
from operators.store.errors import CommitError
from tests.text_checks import TRACEBACK

BIG = 2 ** 64 - 1  # no int64 holds it
NOT_A_DOUBLE = 2 ** 53 + 1  # an int64 no double holds exactly


def chunks(ids: list[str], n: pa.Array) -> pa.Table:
    return pa.table({"docno": ids, "doc_id": ids, "text": [f"honey {i}" for i in ids], "n": n})


@pytest.fixture
def index(tmp_path) -> Index:
    """A BM25 index whose ``n`` is int64 (shard ``s0``: a, b)."""
    idx = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    idx.add(chunks(["a", "b"], pa.array([5, -1], pa.int64())), shard_id="s0")
    return idx


def _all_rows(idx: Index) -> pa.Table:
    """Every live row, read from every shard into one table (what a search whose hits span the shards reads)."""
    return idx.documents_of(idx.search_bm25(["honey"], k=10))


def test_a_uint64_beyond_int64_beside_int64_is_refused_naming_the_column_types_and_value(index):
    with pytest.raises(CommitError) as refused:
        index.add(chunks(["c", "d"], pa.array([BIG, 7], pa.uint64())), shard_id="s1")
    message = refused.value.message
    assert refused.value.field == "n"
    assert "shard 's1': column 'n' is uint64, and int64 in shard 's0' of " in message
    assert f"these merge to int64, which cannot hold every value of shard 's1' (Integer value {BIG} " in message
    assert "nothing was added" in message and "a metadata column of another name" in message
    after = Index.open(index.path)
    assert len(after) == 2 and not after.uncommitted()  # nothing of it stored, nothing lost
    assert sorted(_all_rows(after).column("n").to_pylist()) == [-1, 5]


def test_a_uint64_that_fits_int64_still_merges(index):
    index.add(chunks(["c", "d"], pa.array([2 ** 63 - 1, 7], pa.uint64())), shard_id="s1")
    rows = _all_rows(Index.open(index.path))
    assert rows.schema.field("n").type == pa.int64()
    assert sorted(rows.column("n").to_pylist()) == [-1, 5, 7, 2 ** 63 - 1]


def test_new_documents_whose_type_would_change_what_the_kept_values_are_cast_to_are_refused(tmp_path):
    """The values that do not fit are the index's: int64 documents beside a uint64 shard beyond int64, and a double
    beside an int64 beyond 2**53; the message says to convert the new ones to the kept shard's type."""
    for kept, new, merged in [(pa.array([BIG], pa.uint64()), pa.array([-1], pa.int64()), "int64"),
                              (pa.array([NOT_A_DOUBLE], pa.int64()), pa.array([0.5]), "double")]:
        idx = Index.create(tmp_path / merged, IndexSettings(dense=False))
        idx.add(chunks(["a"], kept), shard_id="s0")
        with pytest.raises(CommitError) as refused:
            idx.add(chunks(["b"], new), shard_id="s1")
        message = refused.value.message
        assert f"shard 's1': column 'n' is {new.type}, and {kept.type} in shard 's0'" in message
        assert f"these merge to {merged}, which cannot hold every value of shard 's0'" in message
        assert f"convert the new documents' values to {kept.type}, the type of shard 's0'" in message
        assert len(Index.open(idx.path)) == 1


def test_an_int64_beyond_2_53_is_refused_beside_doubles_and_a_replaced_value_no_longer_counts(tmp_path):
    idx = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    idx.add(chunks(["a"], pa.array([1.5])), shard_id="s0")
    with pytest.raises(CommitError, match=f"column 'n' is int64, and double in shard 's0' .*Integer value "
                                          f"{NOT_A_DOUBLE} not in range"):
        idx.add(chunks(["b"], pa.array([NOT_A_DOUBLE], pa.int64())), shard_id="s1")
    idx.add(chunks(["b"], pa.array([2 ** 53], pa.int64())), shard_id="s1")  # a double holds it
    # only live values count: the update that replaces the one beyond int64 is no conflict
    big = Index.create(tmp_path / "big", IndexSettings(dense=False))
    big.add(chunks(["a", "b"], pa.array([BIG, 7], pa.uint64())), shard_id="s0")
    big.upsert(chunks(["a"], pa.array([-1], pa.int64())))
    assert sorted(_all_rows(Index.open(big.path)).column("n").to_pylist()) == [-1, 7]


def test_tessera_index_add_refuses_it_in_one_line_and_keeps_the_index(tmp_path, capsys):
    """JSON numbers: an integer beyond 2**53 (int64), then a fraction (double)."""
    path = str(tmp_path / "idx")
    for name, docs in [("a", [("a", NOT_A_DOUBLE), ("b", 1)]), ("b", [("c", 0.5)])]:
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"_id": i, "text": f"honey {i}", "n": n}) + "\n"
                                                        for i, n in docs))
    assert main(["index", "add", path, str(tmp_path / "a.jsonl"), "--no-dense"]) == 0
    capsys.readouterr()
    assert main(["index", "add", path, str(tmp_path / "b.jsonl")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and TRACEBACK not in err, err
    assert "column 'n' is double, and int64 in shard " in err and "merge to double" in err, err
    assert f"Integer value {NOT_A_DOUBLE} not in range" in err and "convert the new documents' values to int64" in err
    index = Index.open(path)
    assert len(index) == 2 and not index.uncommitted()
    assert sorted(_all_rows(index).column("n").to_pylist()) == [1, NOT_A_DOUBLE]
