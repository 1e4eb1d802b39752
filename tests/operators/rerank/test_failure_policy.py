"""The failure policy every reranker shares (operators/rerank/_reranker.py), checked with a reranker
that fails for chosen queries: first_stage keeps the incoming ranking and marks the query degraded;
error fails the step; no row is ever lost."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from operators.errors import OperatorError
from operators.rerank._reranker import Reranker
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
