"""What the Ray Data executor plans before it builds a dataset (no Ray): fused fan-ins and the input's blocks."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from flows.executors.base import scope_batches
from flows.executors.ray_plan import (
    ClusterResources, cut_input, input_readers, largest_node_cpus, plan_stages, stage_inputs)
from flows.spec import FlowSpec
from operators import create


def built(name: str):
    return FlowSpec.load(name).with_index("/nowhere").build()  # an index is only opened when a step runs


def test_an_output_fan_in_without_a_model_runs_with_its_branches_when_streaming():
    flow = built("hybrid")
    assert plan_stages(flow, flow.needed_steps(), keep_history=False) == [("bm25", "dense", "fused")]
    assert stage_inputs(flow, ("bm25", "dense", "fused")) == {"bm25": (), "dense": (), "fused": ("bm25", "dense")}
    # with history every step's output is kept, so each is a stage of its own
    assert plan_stages(flow, flow.needed_steps(), keep_history=True) == [("bm25",), ("dense",), ("fused",)]


def test_a_fan_in_that_later_steps_read_stays_a_stage_of_its_own():
    flow = built("hybrid_ce")  # fused -> rerank: the fan-in is not the output
    assert plan_stages(flow, flow.needed_steps(), keep_history=False) == [
        ("bm25",), ("dense",), ("fused",), ("rerank",)]


def queries(n: int) -> pa.Table:
    return pa.table({"qid": [f"q{i}" for i in range(n)], "query": [f"text {i}" for i in range(n)]})


@pytest.mark.parametrize("n", [1000, 10_000, 300])
def test_query_steps_input_is_cut_only_at_their_local_batch_ends(n):
    cut = cut_input(queries(n), cpus=2, batch_size=256, per_query=True)
    assert cut.aligned and cut.one_row_per_qid
    assert len(cut.bounds) - 1 == min(-(-n // 256), 4)  # a block may be one batch; two blocks per CPU at most
    assert all(b % 256 == 0 for b in cut.bounds[:-1]) and cut.bounds[-1] == n
    # each block, cut as the local executor cuts, gives the local executor's batches
    op = create("retrieve.bm25", {}, step_id="bm25")
    local = [b.column("qid").to_pylist() for b in scope_batches(op, queries(n), 256)]
    on_blocks = [b.column("qid").to_pylist() for piece in cut.pieces(queries(n)) for b in scope_batches(op, piece, 256)]
    assert on_blocks == local


def test_without_a_batch_size_query_steps_get_the_input_in_one_block():
    assert cut_input(queries(5000), cpus=2, batch_size=None, per_query=True).bounds == [0, 5000]


def test_input_readers_name_the_batch_size_of_the_query_steps_that_read_the_input():
    assert input_readers(built("hybrid"), ["bm25", "dense", "fused"]) == (256, True)
    rows = FlowSpec.parse({"name": "rows", "steps": {"words": {"op": "analyze.word_count"}}}).build()
    assert input_readers(rows, ["words"]) == (None, False)  # a row step reads it: cut by rows, as before


def test_a_fused_fan_ins_blocks_are_collected_in_the_local_order():
    """Locally a query the first branch found nothing for comes after every query it found something for;
    a fused fan-in's blocks each put it last in their own block, and collecting restores the local order."""
    from flows.executors.group_order import in_local_order, with_branch_order
    from flows.executors.base import fan_in
    from operators.tables import qid_groups

    def rows(qids):
        return pa.table({"qid": qids, "docno": [f"d-{q}" for q in qids]})

    first, second = rows(["q1", "q3", "q4"]), rows(["q1", "q2", "q3", "q4"])  # the first branch lacks q2
    whole = fan_in("join", [first, second], ("a", "b"))
    local = [qid for qid, _ in qid_groups(whole)]
    assert local == ["q1", "q3", "q4", "q2"]
    blocks = [(rows(["q1"]), rows(["q1", "q2"])), (rows(["q3", "q4"]), rows(["q3", "q4"]))]  # q1-q2 | q3-q4
    outs = [with_branch_order(fan_in("join", [a, b], ("a", "b")), [a, b]) for a, b in blocks]
    collected = in_local_order(pa.concat_tables(outs))
    assert [qid for qid, _ in qid_groups(collected)] == local
    assert collected.column_names == ["qid", "docno"]
    # Every query found by the first branch: the blocks are already in the local order, and stay so.
    found = [(rows(["q1", "q2"]), rows(["q1", "q2"])), (rows(["q3", "q4"]), rows(["q4"]))]
    outs = [with_branch_order(fan_in("join", [a, b], ("a", "b")), [a, b]) for a, b in found]
    collected = in_local_order(pa.concat_tables(outs))
    assert [qid for qid, _ in qid_groups(collected)] == ["q1", "q2", "q3", "q4"]
    assert collected.equals(pa.concat_tables(outs).drop_columns(["__tessera_branch"]))


def test_a_cpu_hint_above_the_largest_nodes_cpus_is_capped_there_with_a_warning(caplog):
    """Ray never places a task that asks for more CPUs than one node has (the run waited for ever); a fused stage
    takes the most of its steps'."""
    spec = FlowSpec.parse({"name": "cpus3", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"k": 10}}, "wc": {"op": "analyze.word_count", "num_cpus": 3}}})
    flow = spec.with_index("/nowhere").build()
    nodes = [{"Alive": True, "Resources": {"CPU": 2.0}}, {"Alive": True, "Resources": {"CPU": 1.0}},
             {"Alive": False, "Resources": {"CPU": 8.0}}]
    assert largest_node_cpus(nodes) == 2.0 and largest_node_cpus([]) is None
    with caplog.at_level(logging.WARNING, logger="flows.executors.ray_plan"):
        resources = ClusterResources(flow, {"CPU": 3.0}, node_cpus=largest_node_cpus(nodes))
        assert resources.of_stage(("bm25", "wc")) == (None, 2, 0)
        assert resources.num_cpus("wc") == 2 and resources.num_cpus("bm25") == 1
    said = "step 'wc' asks for 3 CPU(s) per task but the Ray cluster's largest node has 2: running it with 2"
    assert caplog.text.count(said) == 1
    assert ClusterResources(flow, {"CPU": 4.0}).num_cpus("wc") == 3  # one node of 4: as asked
