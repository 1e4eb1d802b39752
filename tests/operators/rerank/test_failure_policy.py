"""The failure policy every reranker shares (operators/rerank/base.py), checked with a reranker
that fails for chosen queries: first_stage keeps the incoming ranking and marks the query degraded;
error fails the step; no row is ever lost."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from operators.errors import OperatorError
from operators.rerank.base import Reranker
from operators.testing import sample_results


class WordOverlapRerank(Reranker):
    """Scores by shared words; fails for queries containing 'opera' and returns a short list for 'immune'."""

    name = ""  # not registered

    def score_texts(self, query, texts):
        if "opera" in query:
            raise TimeoutError("scoring service timed out after 2.0 s")
        words = set(query.lower().split())
        scores = np.array([len(words & set(t.lower().split())) for t in texts], dtype=float)
        return scores[:-1] if "immune" in query else scores


def test_first_stage_keeps_the_ranking_and_marks_the_query_degraded(caplog):
    table = sample_results(n_queries=3, per_query=6)
    op = WordOverlapRerank({"n": 4}, step_id="overlap")
    out = op(table)
    assert out.num_rows == table.num_rows
    for qid in ("q2", "q3"):
        before, after = (t.filter(pc.equal(t["qid"], qid)) for t in (table, out))
        assert after["docno"].to_pylist() == before["docno"].to_pylist()
        assert after["score"].to_pylist() == before["score"].to_pylist()
        assert after["rank_overlap"].to_pylist() == before["rank"].to_pylist()
        assert after["score_overlap"].null_count == after.num_rows
    metadata = op.drain_metadata()
    assert set(metadata) == {"q2", "q3"}
    assert "timed out" in metadata["q2"]["degraded"]["reason"]
    assert metadata["q2"]["degraded"]["step"] == "overlap"
    assert "3 scores for 4 candidates" in metadata["q3"]["degraded"]["reason"]
    assert "q1" not in metadata and out.filter(pc.equal(out["qid"], "q1"))["score_overlap"].null_count == 2
    assert any("keeps its first-stage ranking" in r.getMessage() for r in caplog.records)


def test_error_policy_fails_the_step_naming_query_and_reason():
    op = WordOverlapRerank({"on_error": "error"}, step_id="overlap")
    with pytest.raises(OperatorError, match="q2.*timed out") as info:
        op(sample_results(n_queries=2, per_query=3))
    assert "overlap" in str(info.value)


class OverlapRerank(WordOverlapRerank):
    """WordOverlapRerank under a name a flow step can carry (still not registered)."""

    name = "test.overlap"


def _many_queries(n_queries: int, per_query: int):
    """``n_queries`` copies of one sample query's candidates, under qids q0, q1, ..."""
    import pyarrow as pa

    from operators.tables import concat

    one = sample_results(n_queries=1, per_query=per_query)
    at = one.column_names.index("qid")
    return concat([one.set_column(at, "qid", pa.array([f"q{i}"] * per_query)) for i in range(n_queries)])


def test_a_long_rerank_step_reports_progress_between_batches_and_ranks_as_in_one_batch():
    """Rerankers run about 1,000 rows a batch: the executor reports progress (and can cancel) while a
    benchmark's rerank pass goes, and the ranking is that of one batch over every query."""
    from flows.executors.local import LocalExecutor
    from flows.spec import Flow, FlowSpec, StepSpec

    def flow(batch_size=None) -> Flow:
        op = OverlapRerank({"n": 150}, step_id="overlap")
        spec = FlowSpec(name="rerank", steps={"overlap": StepSpec(op=op.name, params=op.params.model_dump(),
                                                                  batch_size=batch_size)})
        return Flow(spec=spec, order=["overlap"], inputs={"overlap": ()}, operators={"overlap": op},
                    output="overlap")

    table = _many_queries(12, 200)  # 2,400 rows
    events = []
    batched = LocalExecutor().run(flow(), table, progress=events.append)
    whole = LocalExecutor().run(flow(batch_size=100_000), table)
    assert batched.table.equals(whole.table)
    during = [e.step_rows_done for e in events if e.step == "overlap" and not e.finished]
    assert len(during) >= 3 and during == sorted(during) and during[-1] == table.num_rows
