"""A country condition matches any of a document's countries: ``country`` or an item of the ``countries`` list
column that ``analyze.dimensions`` writes beside it, wherever filters run (``postprocess.filter`` on a table, a
retriever's pre-filter over the doc store and its post-filter); doc stores without that list read ``country`` alone.
BM25 only, no model, no Ray."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.filters import MetadataFilter, filter_table

TEXT = pa.list_(pa.string())


def _table() -> pa.Table:
    """d1 is about France and Germany (France named most), d3 names France second in lower case; d4 and d5 name no
    country (an empty list, a null one)."""
    return pa.table({
        "docno": ["d1", "d2", "d3", "d4", "d5"],
        "country": ["FR", "DE", "US", None, None],
        "countries": pa.array([["FR", "DE"], ["DE"], ["US", "fr"], [], None], TEXT),
    })


def _matching(table: pa.Table, spec: dict) -> list[str]:
    return filter_table(table, MetadataFilter.model_validate(spec)).column("docno").to_pylist()


def test_a_country_matches_any_of_the_documents_countries():
    table = _table()
    assert _matching(table, {"country": "DE"}) == ["d1", "d2"]
    assert _matching(table, {"country": ["fr"]}) == ["d1", "d3"]  # case-insensitive, list items too
    assert _matching(table, {"country": ["JP", "US"]}) == ["d3"]
    assert _matching(table, {"field": "country", "eq": "FR"}) == ["d1"]  # the first-ranked one alone
    assert _matching(table, {"not": {"country": "DE"}}) == ["d3"]  # no country: no match, not even under not
    assert _matching(table, {"any": [{"country": "DE"}, {"field": "country", "missing": True}]}) == \
        ["d1", "d2", "d4", "d5"]
    sliced = table.slice(1)  # batches at an offset: list items are counted from the slice's own first row
    assert _matching(sliced, {"country": "DE"}) == ["d2"]


def test_without_a_list_of_countries_the_country_column_alone_is_read():
    old = _table().drop_columns(["countries"])  # a doc store from before analyze.dimensions wrote countries
    assert _matching(old, {"country": "DE"}) == ["d2"]
    other = _table().set_column(2, "countries", pa.array(["FR;DE", "DE", "US;FR", None, None]))  # not lists
    assert _matching(other, {"country": "DE"}) == ["d2"]
    large = _table().set_column(2, "countries", _table().column("countries").cast(pa.large_list(pa.large_string())))
    assert _matching(large, {"country": "DE"}) == ["d1", "d2"]


def _chunks(ids: list[str], texts: list[str], country: list[str], countries: list[list[str]] | None) -> pa.Table:
    columns = {"docno": [f"{i}#0" for i in ids], "doc_id": ids, "text": texts, "country": country}
    if countries is not None:
        columns["countries"] = pa.array(countries, TEXT)
    return pa.table(columns)


@pytest.fixture
def places(tmp_path) -> Path:
    """An index whose first shard (o1) was written before ``countries`` (``country`` alone) and whose second (n1 to
    n3) has both."""
    from operators.store import Index, IndexSettings

    index = Index.create(tmp_path / "places", IndexSettings(dense=False))
    index.add(_chunks(["o1"], ["rivers and bridges"], ["DE"], None))
    index.add(_chunks(["n1", "n2", "n3"], ["rivers of France and Germany", "rivers of Germany", "rivers of Japan"],
                      ["FR", "DE", "JP"], [["FR", "DE"], ["DE"], ["JP"]]))
    return index.path


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_a_retriever_filter_reads_the_doc_stores_list_of_countries(places, mode):
    from operators.registry import create

    bm25 = create("retrieve.bm25", {"index": str(places), "k": 5, "filter": {"country": "de"}, "filter_mode": mode})
    found = bm25(pa.table({"qid": ["1"], "query": ["rivers"]}))
    assert sorted(found.column("docno").to_pylist()) == ["n1#0", "n2#0", "o1#0"]
