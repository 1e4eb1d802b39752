"""rerank.llm_group: points from hand-made judges (the fault server), the cost guard, failures, the embedded model."""

from __future__ import annotations

import logging

import pyarrow.compute as pc
import pytest

from operators import create
from operators.errors import OperatorError, ParamsError
from operators.testing import OperatorContract, sample_results


class TestGroupContract(OperatorContract):
    operator_name = "rerank.llm_group"

    @pytest.fixture(autouse=True)
    def _judge(self, fault_models):
        fault_models.reply = "1"

    def make_operator(self, **params):
        return create(self.operator_name, {"model": "fault-ok", **params})


@pytest.mark.parametrize("window, reply, expected", [
    (2, "2", ["d4", "d3", "d2", "d1"]),   # the later of every pair wins: points 0, 1, 2, 3
    (3, "[3]", ["d4", "d3", "d1", "d2"]),  # the last of every triple: points 0, 0, 1, 3 (ties by incoming rank)
    (2, "1", ["d1", "d2", "d3", "d4"]),
])
def test_points_from_a_hand_made_judge(fault_models, caplog, window, reply, expected):
    fault_models.reply = reply
    table = sample_results(2, 4)
    op = create("rerank.llm_group", {"model": "fault-ok", "window_size": window}, step_id="g")
    with caplog.at_level(logging.INFO, logger="operators.rerank.llm_group"):
        out = op(table)
    calls = {2: 6, 3: 4}[window]
    assert fault_models.attempts["ok"] == 2 * calls
    assert any(f"{2 * calls} model calls" in r.getMessage() for r in caplog.records)
    for qid in ("q1", "q2"):
        incoming = table.filter(pc.equal(table["qid"], qid))["docno"].to_pylist()
        assert out.filter(pc.equal(out["qid"], qid))["docno"].to_pylist() == \
            [incoming[int(d[1:]) - 1] for d in expected]
    assert op.drain_metadata()["q1"]["usage"]["g"]["calls"] == calls


def test_the_cost_guard_names_max_calls():
    with pytest.raises(ParamsError, match="max_calls") as err:
        create("rerank.llm_group", {"n": 20, "window_size": 3, "max_calls": 100})
    assert "1140 calls" in str(err.value)
    create("rerank.llm_group", {"n": 20, "window_size": 3, "max_calls": 1140})


def test_the_cost_guard_at_run_time_when_n_is_null(fault_models):
    op = create("rerank.llm_group", {"model": "fault-ok", "n": None, "max_calls": 5})
    with pytest.raises(OperatorError, match="4 candidates in groups of 2 cost 6 calls.*max_calls 5"):
        op(sample_results(1, 4))
    assert fault_models.attempts["ok"] == 0


def test_some_failed_calls_degrade_the_query_but_keep_every_row(fault_models):
    fault_models.reply = "I cannot tell"
    table = sample_results(1, 3)
    op = create("rerank.llm_group", {"model": "fault-ok"}, step_id="g")
    out = op(table)
    assert out["docno"].to_pylist() == table["docno"].to_pylist() and out["score_g"].null_count == 3
    assert op.drain_metadata()["q1"]["degraded"]["reason"].startswith(
        "the model replied to all 3 calls but none named a candidate; first:")


def test_the_cost_line_says_query_for_one(fault_models, caplog):
    fault_models.reply = "1"
    with caplog.at_level(logging.INFO, logger="operators.rerank.llm_group"):
        create("rerank.llm_group", {"model": "fault-ok"}, step_id="g")(sample_results(1, 2))
    assert "1 model call for 1 query, starting" in caplog.text   # it said "1 model calls for 1 queries"
    # a note, not a warning: every normal run printed "tessera: warning:" (the command line's note: "tessera: ")
    (said,) = [r for r in caplog.records if "model call" in r.getMessage()]
    assert said.note


@pytest.mark.slow
def test_the_embedded_model_judges_real_groups():
    table = sample_results(1, 3)
    op = create("rerank.llm_group", {"model": "local", "max_chars": 150, "max_tokens": 4}, step_id="g")
    out = op(table)
    assert sorted(out["docno"].to_pylist()) == sorted(table["docno"].to_pylist())
    assert out["rank"].to_pylist() == [1, 2, 3]
    assert op.drain_metadata()["q1"]["usage"]["g"]["calls"] == 3


def test_max_chars_says_the_embedded_models_real_window():
    """It said 2,048 tokens while the embedded model's window is 4,096 (docs/llm.md)."""
    from operators.llm.embedded_model import CONTEXT_TOKENS
    from operators.rerank._llm_judge import JudgeParams

    assert CONTEXT_TOKENS == 4096
    assert "reads 4,096 tokens in all" in JudgeParams.model_fields["max_chars"].description


def test_a_window_wider_than_n_is_refused_naming_window_size():
    """window_size 5 over n 2 built, and made one call a query: a pick of the best, not groups."""
    with pytest.raises(ParamsError) as err:
        create("rerank.llm_group", {"n": 2, "window_size": 5}, step_id="groups")
    assert err.value.field == "params.window_size" and "more than n 2" in str(err.value)
    assert create("rerank.llm_group", {"n": 3, "window_size": 3}, step_id="groups").params.window_size == 3


def test_a_query_of_one_candidate_costs_nothing_and_says_nothing(fault_models, caplog):
    with caplog.at_level(logging.INFO, logger="operators.rerank.llm_group"):
        out = create("rerank.llm_group", {"model": "fault-ok"}, step_id="g")(sample_results(1, 1))
    assert out.num_rows == 1 and fault_models.attempts["ok"] == 0
    assert "model call" not in caplog.text  # it said "0 model calls for 1 query, starting"
