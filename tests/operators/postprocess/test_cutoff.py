"""postprocess.cutoff: the contract, threshold semantics (LlamaIndex's), the per-query budget."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import ParamsError
from operators.registry import create
from operators.testing import OperatorContract, sample_results


class TestCutoffContract(OperatorContract):
    operator_name = "postprocess.cutoff"

    def make_operator(self, **params):
        return create("postprocess.cutoff", {"similarity_cutoff": 2.0, "max_chunks": 3, **params}, step_id="cut")


def test_threshold_keeps_scores_at_or_above_and_drops_missing_scores():
    table = sample_results(2, 5)  # scores 5, 4, 3, 2, 1 per query
    scores = table.column("score").to_pylist()
    scores[1] = None
    table = table.set_column(table.column_names.index("score"), "score", pa.array(scores, pa.float64()))
    out = create("postprocess.cutoff", {"similarity_cutoff": 3.0})(table)
    rows = [(r["qid"], r["score"], r["rank"]) for r in out.to_pylist()]
    assert rows == [("q1", 5.0, 1), ("q1", 3.0, 2), ("q2", 5.0, 1), ("q2", 4.0, 2), ("q2", 3.0, 3)]


def test_max_chunks_and_both_together():
    table = sample_results(3, 5)
    out = create("postprocess.cutoff", {"max_chunks": 2})(table)
    assert out.num_rows == 6 and set(out.column("rank").to_pylist()) == {1, 2}
    both = create("postprocess.cutoff", {"max_chunks": 4, "similarity_cutoff": 3.5})(table)
    assert both.column("score").to_pylist() == [5.0, 4.0] * 3


def test_cutoff_on_another_score_column_renumbers_ranks():
    table = sample_results(1, 4)
    table = table.append_column("score_ce", pa.array([0.1, 0.9, 0.2, 0.8]))
    out = create("postprocess.cutoff", {"similarity_cutoff": 0.5, "score_column": "score_ce"})(table)
    assert out.column("score_ce").to_pylist() == [0.9, 0.8] and out.column("rank").to_pylist() == [1, 2]


def test_nothing_to_do_is_a_params_error():
    with pytest.raises(ParamsError):
        create("postprocess.cutoff", {})
