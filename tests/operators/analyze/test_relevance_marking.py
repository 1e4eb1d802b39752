"""analyze.relevance_marking: a hand-made reply through the fault server is checked against the original text
(accepted with the original spacing, refused with a reason), the degrade policy, and the embedded model's reply
either passes the check or says why not."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.analyze.relevance_marking import place_markers
from operators.llm.testing import SLOW_TIMEOUT_S
from operators.registry import create, get_operator
from operators.testing import OperatorContract

TEXT = "Honey bees are  social insects.\nThey make honey from nectar and pollinate flowers."


def one_row(text: str = TEXT) -> pa.Table:
    return pa.table({"qid": ["q1"], "query": ["which insects make honey"], "docno": ["d1"], "text": [text]})


class TestRelevanceMarkerContract(OperatorContract):
    operator_name = "analyze.relevance_marking"

    @pytest.fixture(autouse=True)
    def _fault_models(self, fault_models):
        self.server = fault_models

    def make_operator(self, **params):
        return get_operator(self.operator_name)({"model": "fault-ok", **params}, step_id="mark")


def test_a_reply_that_only_adds_markers_is_put_into_the_original_text(fault_models):
    fault_models.reply = "Honey bees are social insects. **They make honey from nectar** and pollinate flowers."
    op = create("RelevanceMarkingStep", {"model": "fault-ok"}, step_id="mark")
    out = op(one_row())
    assert out.column("marked_text").to_pylist() == [
        "Honey bees are  social insects.\n**They make honey from nectar** and pollinate flowers."]
    assert out.column("marking_problem").to_pylist() == [None] and out.column("text").to_pylist() == [TEXT]
    meta = op.drain_metadata()["q1"]
    assert "degraded" not in meta and meta["usage"]["mark"]["calls"] == 1
    assert "Query: which insects make honey\nText: " + TEXT in fault_models.bodies[0]["messages"][-1]["content"]


@pytest.mark.parametrize("reply, problem", [
    ("Honey bees are social insects. **They make honey** and pollinate plants.", "not the original text"),
    ("**Honey bees** are social insects.", "not the original text"),
    (TEXT, "marks no passage"),
    ("Honey bees are social insects. **They make honey from nectar and pollinate flowers.", "do not pair up"),
    ("**** " + TEXT, "marks an empty passage"),
])
def test_a_reply_that_changes_the_text_leaves_it_unmarked_and_says_why(fault_models, reply, problem):
    fault_models.reply = reply
    op = create("analyze.relevance_marking", {"model": "fault-ok"}, step_id="mark")
    out = op(one_row())
    assert out.column("marked_text").to_pylist() == [TEXT] and problem in out.column("marking_problem")[0].as_py()
    degraded = op.drain_metadata()["q1"]["degraded"]
    assert degraded["step"] == "mark" and problem in degraded["reason"]


@pytest.mark.parametrize("model, reason", [("fault-error", "api"), ("fault-slow", "timeout"),
                                           ("fault-junk", "no usable text")])
def test_a_failed_call_leaves_the_text_unmarked(fault_models, model, reason):
    timeout = SLOW_TIMEOUT_S if model == "fault-slow" else 0.5
    op = create("analyze.relevance_marking", {"model": model, "timeout": timeout, "num_retries": 0}, step_id="mark")
    out = op(one_row())
    assert out.column("marked_text").to_pylist() == [TEXT] and reason in out.column("marking_problem")[0].as_py()
    assert reason in op.drain_metadata()["q1"]["degraded"]["reason"]


def test_the_step_query_replaces_the_flows(fault_models):
    op = create("analyze.relevance_marking", {"model": "fault-ok", "query": "pollination"})
    op(one_row().drop_columns(["query"]))
    assert "Query: pollination\n" in fault_models.bodies[0]["messages"][-1]["content"]


@pytest.mark.parametrize("original, marked, expected", [
    ("a b\n c", "a **b c**", "a **b\n c**"),
    ("ab  cd", "**a**b cd", "**a**b  cd"),
    ("x y", "**x****y**", "**x** **y**"),
])
def test_place_markers_keeps_the_original_spacing(original, marked, expected):
    assert place_markers(original, marked) == expected


@pytest.mark.integration
def test_the_embedded_model_marks_or_says_why_not():
    op = create("analyze.relevance_marking", {"model": "local", "max_tokens": 48, "timeout": 120}, step_id="mark")
    out = op(one_row())
    marked, problem = out.column("marked_text")[0].as_py(), out.column("marking_problem")[0].as_py()
    meta = op.drain_metadata()["q1"]
    if problem is None:
        assert "**" in marked and " ".join(marked.replace("**", "").split()) == " ".join(TEXT.split())
        assert "degraded" not in meta
    else:
        assert marked == TEXT and meta["degraded"]["step"] == "mark"
    assert meta["usage"]["mark"]["calls"] == 1 and meta["usage"]["mark"]["completion_tokens"] > 0


def test_a_text_with_markers_of_its_own_is_left_unmarked_and_says_why():
    from operators.analyze.relevance_marking import mark
    from operators.llm.gateway import Completion

    original = "Bees **really** make honey."
    marked, problem = mark(original, Completion(text="**Bees **really** make honey.**", model="m"))
    assert marked == original and "of its own" in problem
