"""Per-query metadata joined across steps and batches (``flows.runner.merge_metadata``): a second ``degraded``
mark of a query joins the first instead of replacing it."""

from __future__ import annotations

from flows.runner import merge_metadata
from operators import create


def test_two_steps_degrading_one_query_are_both_named_and_usage_joins_by_step():
    into: dict = {}
    merge_metadata(into, {"q1": {"degraded": {"step": "kw", "reason": "api: 500"}, "usage": {"kw": {"calls": 1}}}})
    merge_metadata(into, {"q1": {"degraded": {"step": "llm", "reason": "junk"}, "usage": {"llm": {"calls": 2}}}})
    assert into["q1"]["degraded"] == {"step": "kw, llm", "failures": 2, "reason": "kw: api: 500; llm: junk"}
    assert into["q1"]["usage"] == {"kw": {"calls": 1}, "llm": {"calls": 2}}
    merge_metadata(into, {"q1": {"degraded": {"step": "llm", "reason": "again"}}})  # no step named twice
    assert into["q1"]["degraded"]["failures"] == 3
    assert into["q1"]["degraded"]["step"] == "kw, llm"


def test_a_third_step_and_a_joined_steps_next_batch_are_each_named_once_with_their_own_reason():
    """The joined mark's step list was put before its reason again at each step: "a, b, c: a, b: a: ..."."""
    into: dict = {}
    for step, reason in (("expand", "no valid query; fell back"), ("kw", "junk"), ("mark", "row d1: not the text"),
                         ("kw", "junk again"), ("sumd", "row d2: api: 500")):
        merge_metadata(into, {"q1": {"degraded": {"step": step, "reason": reason}}})
    assert into["q1"]["degraded"] == {
        "step": "expand, kw, mark, sumd", "failures": 5,
        "reason": "expand: no valid query; fell back; kw: junk; mark: row d1: not the text; sumd: row d2: api: 500"}
    other: dict = {}  # two joined marks (two batches of a fused stage) join step by step
    merge_metadata(other, {"q1": {"degraded": {"step": "kw, sumd", "failures": 2, "reason": "kw: x; sumd: y"}}})
    merge_metadata(other, {"q1": {"degraded": {"step": "mark, kw", "failures": 3, "reason": "mark: z; kw: w"}}})
    assert other["q1"]["degraded"] == {"step": "kw, sumd, mark", "failures": 5, "reason": "kw: x; sumd: y; mark: z"}


def test_a_steps_failures_on_one_query_are_counted_and_the_first_reason_kept():
    op = create("summarize.documents", {"model": "local"}, step_id="sum")
    for reason in ("api: 500 on d1", "api: 500 on d2", "timeout on d3"):
        op.mark_degraded("q1", reason)
    assert op.drain_metadata()["q1"]["degraded"] == {"step": "sum", "reason": "api: 500 on d1", "failures": 3}
    merged: dict = {}
    for batch in ({"step": "sum", "reason": "a"}, {"step": "sum", "reason": "b", "failures": 2}):  # two batches
        merge_metadata(merged, {"q1": {"degraded": batch}})
    assert merged["q1"]["degraded"] == {"step": "sum", "reason": "a", "failures": 3}
