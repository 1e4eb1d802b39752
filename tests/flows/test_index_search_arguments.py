"""``Index.search``'s ``k`` and ``method`` as a notebook passes them: numpy integers, a bool by mistake, and the
default method on an index that holds BM25 alone (a real small index, no model)."""

from __future__ import annotations

import numpy as np
import pytest

from operators.errors import SpecError


@pytest.fixture(scope="module")
def bm25_only(tmp_path_factory):
    """Four documents on bees as one shard of an index without vectors."""
    import pyarrow as pa

    from flows.api import Index
    from operators.store import Index as StoreIndex, IndexSettings

    store = StoreIndex.create(tmp_path_factory.mktemp("bm25_only") / "idx", IndexSettings(dense=False))
    store.add(pa.Table.from_pylist([{"docno": f"d{i}#0", "doc_id": f"d{i}", "text": "bees " * (4 - i) + "honey"}
                                    for i in range(4)]))
    return Index(store)


def test_the_default_method_is_the_one_a_bm25_index_can_answer(bm25_only):
    hits = bm25_only.search("bees", k=2)
    assert hits.column("docno").to_pylist() == ["d0#0", "d1#0"]


@pytest.mark.parametrize("method", ["dense", "hybrid"])
def test_a_method_the_index_was_not_ingested_for_names_the_one_it_can(bm25_only, method):
    with pytest.raises(SpecError, match="dense vectors.*use method='bm25'") as err:
        bm25_only.search("bees", method=method)
    assert err.value.field == "method"
    # it said "was not ingested with" of an index `tessera index add` (or the store, as here) made too
    assert "was built without (--no-dense of tessera ingest or tessera index add; settings={'dense': False} in " \
        "Python)" in err.value.message and "ingested with" not in err.value.message


def test_k_may_be_a_numpy_integer(bm25_only):
    assert bm25_only.search("bees", k=np.int64(3), method="bm25").num_rows == 3


@pytest.mark.parametrize("k", [True, 0, 2.5, "3"])
def test_a_k_that_is_not_a_count_names_k(bm25_only, k):
    with pytest.raises(SpecError, match="k must be a whole number") as err:
        bm25_only.search("bees", k=k, method="bm25")
    assert err.value.field == "k"
