"""A region condition matches any of a document's regions: ``region`` (its first country's continent) or an item
of the ``regions`` list column that ``analyze.dimensions`` writes beside it (every continent the text names or
names a country of), as ``{country: X}`` reads ``countries``; doc stores without that list read ``region`` alone.
Real Wikipedia leads, ``analyze.dimensions`` itself, a real two-shard BM25 index; no model, no Ray."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.filters import MetadataFilter, filter_table
from operators.registry import create

# Leads of English Wikipedia articles (the vital-articles corpus), each naming places on several continents.
LEADS = [
    ("wv09922", "Bean", "A bean is the seed of plants in many genera of the legume family (Fabaceae) used as a "
     "vegetable for human consumption or animal feed. The seeds are sold fresh or preserved through drying. Beans "
     "have been cultivated since the seventh millennium BCE in Thailand, and since the second millennium BCE in "
     "Europe and in Peru. Most beans, with the exception of peas, are summer crops. As legumes, the plants fix "
     "nitrogen and form seeds with a high protein content. They are produced on a scale of millions of tons "
     "annually in many countries, with India as the largest producer."),
    ("wv01464", "Mimosa", "Mimosa is a genus of about 600 species of herbs and shrubs, in the mimosoid clade of the "
     "legume family Fabaceae. Species are native to the Americas, from North Dakota to northern Argentina, and to "
     "eastern Africa as well as the Indian subcontinent and Indochina."),
    ("wv09746", "Coffee", "Coffee is a beverage brewed from roasted ground coffee beans. Dark-colored and bitter, "
     "coffee has a stimulating effect on humans due to its caffeine content."),
]


@pytest.fixture(scope="module")
def leads() -> pa.Table:
    """The leads with ``analyze.dimensions``' columns."""
    ids, titles, texts = zip(*LEADS)
    return create("analyze.dimensions")(pa.table({"docno": list(ids), "title": list(titles), "text": list(texts)}))


def _matching(table: pa.Table, spec: dict) -> list[str]:
    return filter_table(table, MetadataFilter.model_validate(spec)).column("docno").to_pylist()


def test_dimensions_write_every_region_and_region_stays_the_first_countrys(leads):
    rows = {r["docno"]: r for r in leads.select(["docno", "region", "regions"]).to_pylist()}
    assert rows["wv09922"] == {"docno": "wv09922", "region": "Asia", "regions": ["Asia", "South America", "Europe"]}
    assert rows["wv01464"]["region"] == "North America"
    assert rows["wv01464"]["regions"] == ["North America", "South America", "Africa"]
    assert rows["wv09746"]["region"] is None and rows["wv09746"]["regions"] == []


def test_a_text_naming_several_regions_matches_each_of_them(leads):
    assert _matching(leads, {"region": "Asia"}) == ["wv09922"]
    assert _matching(leads, {"region": "south america"}) == ["wv09922", "wv01464"]  # Peru; Argentina
    assert _matching(leads, {"region": "Europe"}) == ["wv09922"]  # a continent named, no country of it
    assert _matching(leads, {"region": ["Africa", "Oceania"]}) == ["wv01464"]
    assert _matching(leads, {"region": "Antarctica"}) == []
    assert _matching(leads, {"field": "region", "eq": "Asia"}) == ["wv09922"]  # the first region alone
    assert _matching(leads, {"not": {"region": "Europe"}}) == ["wv01464"]  # Coffee names no place: no match
    results = leads.append_column("qid", pa.array(["1"] * 3)).append_column("rank", pa.array([1, 2, 3]))
    kept = create("postprocess.filter", {"filter": {"region": "Africa"}})(results)
    assert kept.column("docno").to_pylist() == ["wv01464"]


def test_without_a_list_of_regions_the_region_column_alone_is_read(leads):
    old = leads.drop_columns(["regions"])  # a doc store ingested before analyze.dimensions wrote regions
    assert _matching(old, {"region": "South America"}) == []
    assert _matching(old, {"region": "Asia"}) == ["wv09922"]
    text = leads.set_column(leads.schema.get_field_index("regions"), "regions",
                            pa.array(["Asia;Europe", "Africa", None]))  # a column of text, not lists
    assert _matching(text, {"region": "Europe"}) == []


@pytest.fixture
def regions_index(tmp_path, leads) -> Path:
    """An index whose first shard (o1, about Argentina and Japan: region South America) was written before
    ``regions`` and whose second holds the leads with it."""
    from operators.store import Index, IndexSettings

    def chunks(table: pa.Table) -> pa.Table:
        ids = table.column("docno").to_pylist()
        return table.drop_columns(["docno"]).append_column("docno", pa.array([f"{i}#0" for i in ids])) \
            .append_column("doc_id", pa.array(ids))

    index = Index.create(tmp_path / "regions", IndexSettings(dense=False))
    index.add(chunks(pa.table({"docno": ["o1"], "title": ["Seeds"], "text": ["Legume seeds of Argentina and Japan."],
                               "country": ["AR"], "region": ["South America"]})))
    index.add(chunks(leads.select(["docno", "title", "text", "country", "countries", "region", "regions"])))
    return index.path


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_a_retriever_filter_reads_the_doc_stores_list_of_regions(regions_index, mode):
    bm25 = create("retrieve.bm25", {"index": str(regions_index), "k": 5, "filter": {"region": "south america"},
                                    "filter_mode": mode})
    found = bm25(pa.table({"qid": ["1"], "query": ["legume seeds"]}))
    assert sorted(found.column("docno").to_pylist()) == ["o1#0", "wv01464#0", "wv09922#0"]
    asia = create("retrieve.bm25", {"index": str(regions_index), "k": 5, "filter": {"region": "Asia"},
                                    "filter_mode": mode})
    assert asia(pa.table({"qid": ["1"], "query": ["legume seeds"]})).column("docno").to_pylist() == ["wv09922#0"]
