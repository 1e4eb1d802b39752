"""A retrieve -> rerank flow on the sample index: both executors give the same ranking as the operators
run by hand. Marked ``slow``: the session's sample index takes about 20 s to build."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from operators import create
from operators.testing import sample_queries

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ce_model(untrained_ce) -> str:
    return str(untrained_ce)


def spec(index, model, **rerank) -> FlowSpec:
    return FlowSpec.parse({"name": "bm25-ce", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"index": str(index), "k": 12}},
        "ce": {"op": "rerank.cross_encoder", "params": {"model": model, "n": 8, **rerank}},
    }})


def test_rerank_flow_matches_the_operators_on_each_executor(sample_index, ce_model, make_executor):
    queries = sample_queries(3)
    result = make_executor().run(spec(sample_index, ce_model), queries)
    first = create("retrieve.bm25", {"index": str(sample_index), "k": 12}, step_id="bm25")(queries)
    by_hand = create("rerank.cross_encoder", {"model": ce_model, "n": 8}, step_id="ce")(first)
    columns = ["qid", "docno", "rank", "rank_bm25", "rank_ce"]
    assert result.table.select(columns).equals(by_hand.select(columns))
    assert result.table.column("score_ce").null_count == 3 * 4  # 12 candidates, 8 reranked, per query



def test_a_failing_reranker_keeps_the_first_stage_and_the_flow_result_says_so(sample_index, make_executor, caplog):
    """On Ray too the driver logs the degraded queries' warnings, as the local run does (a worker's own log reached
    the terminal only as Ray's prefixed worker output: flows/executors/ray_warnings.py)."""
    import logging
    import socket

    with socket.socket() as probe:  # a localhost port nobody listens on: every request is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    flow = FlowSpec.parse({"name": "bm25-api", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"index": str(sample_index), "k": 6}},
        "remote": {"op": "rerank.api", "params": {"url": f"http://127.0.0.1:{port}/v1/rerank", "max_retries": 0,
                                                 "timeout": 2}},
    }})
    queries = sample_queries(2)
    with caplog.at_level(logging.WARNING, logger="operators.base"):
        result = make_executor().run(flow, queries)
    first = create("retrieve.bm25", {"index": str(sample_index), "k": 6}, step_id="bm25")(queries)
    assert result.table.select(["qid", "docno", "rank"]).equals(first.select(["qid", "docno", "rank"]))
    assert set(result.metadata) == {"q1", "q2"}
    for marks in result.metadata.values():
        assert marks["degraded"]["step"] == "remote"
        assert "refused" in marks["degraded"]["reason"].lower() or "connect" in marks["degraded"]["reason"].lower()
    said = sorted(record.getMessage() for record in caplog.records if record.name == "operators.base")
    assert said == [f"rerank.api [remote]: query {qid} keeps its first-stage ranking: "
                    f"{result.metadata[qid]['degraded']['reason']}" for qid in ("q1", "q2")]
