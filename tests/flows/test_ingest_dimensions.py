"""The ingest_dimensions spec: analyze.dimensions at ingestion fills the doc-store columns the filters read.

A slice of the Wikipedia vital-articles corpus (../shared/data) is ingested BM25-only; the
retriever's pre-filter and postprocess.filter then select by country and by year range,
and every row they keep is checked against the doc store.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from flows.ingestion import ingest
from flows.ingestion.errors import IngestError
from operators.registry import create
from operators.store import Index

N_DOCS = 300  # wv00000..wv00299: holds the Eiffel Tower (wv00189) and the Great Wall of China (wv00248)


@pytest.fixture(scope="module")
def dimension_index(tmp_path_factory, shared_data):
    corpus = shared_data / "wikipedia_vital10k_ovos" / "corpus.jsonl"
    folder = tmp_path_factory.mktemp("dims")
    with open(corpus, encoding="utf-8") as source:
        lines = [next(source) for _ in range(N_DOCS)]
    (folder / "corpus.jsonl").write_text("".join(lines), encoding="utf-8")
    report = ingest(folder / "corpus.jsonl", folder / "idx", spec="ingest_dimensions", settings={"dense": False},
                    executor="local", shard_size=100, progress=False)
    assert (report.docs, report.failures) == (N_DOCS, 0)
    return folder / "idx"


def doc_store(path) -> pa.Table:
    import pyarrow.parquet as pq

    index = Index.open(path)
    docnos = [d for shard in sorted(s.id for s in index.manifest.shards)
              for d in pq.read_table(path / "shards" / shard / "docs.parquet", columns=["docno"]).column(0).to_pylist()]
    return index.documents(docnos)


@pytest.mark.data
def test_ingested_documents_carry_their_dimensions(dimension_index):
    docs = doc_store(dimension_index)
    for column in ("dates", "year", "year_min", "year_max", "places", "countries", "country", "regions", "region"):
        assert column in docs.column_names
    rows = {r["doc_id"]: r for r in docs.to_pylist()}
    eiffel, wall = rows["wv00189"], rows["wv00248"]
    assert (eiffel["country"], eiffel["region"], eiffel["year_min"], eiffel["year_max"]) == ("FR", "Europe", 1887, 1889)
    assert (wall["country"], wall["region"]) == ("CN", "Asia")
    for column in ("year", "country", "region"):  # filled where the lead names one, not everywhere
        assert 0 < sum(r[column] is not None for r in rows.values()) < N_DOCS


@pytest.mark.data
def test_the_retriever_prefilters_by_country(dimension_index):
    queries = pa.table({"qid": ["q1"], "query": ["tower built by an engineer"]})
    found = create("retrieve.bm25", {"index": str(dimension_index), "k": 1000, "filter": {"country": "fr"}})(queries)
    store = doc_store(dimension_index)
    french = set(store.filter(pc.equal(store.column("country"), "FR")).column("docno").to_pylist())
    assert found.num_rows and set(found.column("country").to_pylist()) == {"FR"}
    assert set(found.column("docno").to_pylist()) <= french
    assert found.column("doc_id")[0].as_py() == "wv00189"  # the Eiffel Tower, first among French documents


@pytest.mark.data
def test_results_filter_by_year_range(dimension_index):
    queries = pa.table({"qid": ["q1"], "query": ["war empire revolution century"]})
    results = create("retrieve.bm25", {"index": str(dimension_index), "k": 100})(queries)
    in_1800s = {"all": [{"field": "year_min", "lte": 1899}, {"field": "year_max", "gte": 1800}]}
    kept = create("postprocess.filter", {"filter": in_1800s})(results)
    expected = [r["docno"] for r in results.to_pylist()
                if r["year_min"] is not None and r["year_min"] <= 1899 and r["year_max"] >= 1800]
    assert 0 < kept.num_rows < results.num_rows
    assert kept.column("docno").to_pylist() == expected
    assert kept.column("rank").to_pylist() == list(range(1, kept.num_rows + 1))
    by_year = create("retrieve.bm25", {"index": str(dimension_index), "k": 100,
                                       "filter": {"field": "year", "gte": 1900, "lte": 1999}})(queries)
    assert by_year.num_rows and all(1900 <= y <= 1999 for y in by_year.column("year").to_pylist())


def test_an_ingest_spec_step_that_is_not_a_row_step_is_refused(tmp_path):
    spec = {"name": "ingest", "steps": {"read": {"op": "sources.jsonl", "params": {"path": "x.jsonl"}},
                                        "top": {"op": "postprocess.reduce"}}}
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "text": "In 1969."}) + "\n", encoding="utf-8")
    with pytest.raises(IngestError, match="'postprocess.reduce' is a query step"):
        ingest(corpus, tmp_path / "idx", spec=spec, settings={"dense": False}, executor="local", progress=False)
