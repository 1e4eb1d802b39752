"""Both executors give the same table on real data with tied scores: SciFact's 1,109 queries over its 5,183 abstracts.

The flow fuses two BM25 rankings by RRF: the index's (title and text) and the in-memory corpus ranker's over
the text alone. A document at ranks (a, b) and one at (b, a) score 1 / (60 + a) + 1 / (60 + b) both, to the
bit: exact ties in every query. Ties come out by docno, so the order cannot depend on which executor, block
or actor ranked them.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec

pytestmark = [pytest.mark.ray, pytest.mark.data,
              pytest.mark.slow]  # slow: a BM25 index of 5,183 abstracts and three Ray runs with actor pools, ~1 min


@pytest.fixture(scope="module")
def scifact_bm25(shared_data, tmp_path_factory):
    from flows.ingestion import ingest

    index = tmp_path_factory.mktemp("scifact") / "index"
    ingest(shared_data / "scifact" / "corpus.jsonl", index, settings={"dense": False}, chunk=False,
           executor="local", progress=False)
    with open(shared_data / "scifact" / "queries.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    queries = pa.table({"qid": [r["_id"] for r in rows], "query": [r["text"] for r in rows]})
    return index, shared_data / "scifact" / "corpus.jsonl", queries


def tied_flow(index, corpus) -> FlowSpec:
    """Two BM25 rankings fused by RRF, 128 queries a call (so Ray cuts the queries into several blocks)."""
    return FlowSpec.parse({"name": "ties", "steps": {
        "index": {"op": "retrieve.bm25", "params": {"index": str(index), "k": 100}, "batch_size": 128},
        "text": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus), "k": 100, "index_title": False},
                 "batch_size": 128, "inputs": []},
        "fused": {"op": "fuse.rrf", "params": {"k": 60}, "inputs": ["index", "text"]},
    }})


def test_local_and_ray_give_identical_tables_with_ties(scifact_bm25, ray_session):
    from flows.executors.ray_data import RayDataExecutor

    index, corpus, queries = scifact_bm25
    spec = tied_flow(index, corpus)
    local = LocalExecutor(keep_history=False).run(spec, queries)
    table = local.table
    # the case has ties, and they come out by docno
    qids, scores, docnos = (table.column(c).to_pylist() for c in ("qid", "score", "docno"))
    ties = [i for i in range(1, table.num_rows) if qids[i] == qids[i - 1] and scores[i] == scores[i - 1]]
    assert len(ties) > 100
    assert all(docnos[i - 1] < docnos[i] for i in ties)
    streamed = RayDataExecutor(keep_history=False).run(spec, queries)  # one fused stage over several blocks
    assert any(k.startswith("fused:index+text+fused") for k in streamed.timings.summary())
    assert streamed.table.equals(table)
    staged = RayDataExecutor(keep_history=True).run(spec, queries)  # a stage per step, the fan-in regrouped
    assert staged.table.equals(table)
    assert {s: (r.rows_in, r.rows_out) for s, r in streamed.steps.items()} == \
        {s: (r.rows_in, r.rows_out) for s, r in local.steps.items()}
