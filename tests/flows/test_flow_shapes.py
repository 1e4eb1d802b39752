"""A table of flow shapes, each run on both executors: expected rows, step order, one run per step."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.testing import sample_results

WORDS = {"op": "analyze.word_count"}
TITLE_WORDS = {"op": "analyze.word_count", "params": {"input_column": "title", "output_column": "n_title"}}


def top(k: int, **extra):
    return {"op": "postprocess.reduce", "params": {"k": k}, **extra}


def expected_rows(table: pa.Table, keep) -> list[tuple]:
    """(qid, docno, word_count) of the input rows ``keep(row)`` selects, in input order."""
    return [(r["qid"], r["docno"], len(r["text"].split())) for r in table.to_pylist() if keep(r)]


SHAPES = {
    # name: (steps, expected order, expected (qid, docno, words) rows, expected rows_in per step)
    "linear": (
        {"words": WORDS, "titles": TITLE_WORDS, "top": top(2)},
        ["words", "titles", "top"],
        lambda t: expected_rows(t, lambda r: r["rank"] <= 2),
        {"words": 18, "titles": 18, "top": 18},
    ),
    "branching": (
        {"words": WORDS, "best": top(1, inputs=["words"]), "titles": {**TITLE_WORDS, "inputs": ["words"]},
         "second": top(2, inputs=["titles"])},
        ["words", "titles", "second"],  # 'best' does not feed the named output (OUTPUTS), so it is not run
        lambda t: expected_rows(t, lambda r: r["rank"] <= 2),
        {"words": 18, "titles": 18, "second": 18},
    ),
    "fan_in": (
        {"a": {**WORDS, "inputs": []}, "b": {**top(1), "inputs": []}, "both": top(2, inputs=["a", "b"])},
        ["a", "b", "both"],
        # the union holds each rank-1 row twice (one per branch) and reduce keeps two per query
        lambda t: [row for r in expected_rows(t, lambda r: r["rank"] == 1) for row in (r, (r[0], r[1], None))],
        {"a": 18, "b": 18, "both": 21},
    ),
    "fan_in_first_branch_lacks_a_query": (
        # a's filter drops q1 (as a BM25 that matches no word of a query): the union lists q2, q3 first, and the
        # result still gives the queries in the input's order
        {"a": {"op": "postprocess.filter", "params": {"filter": {"field": "qid", "in": ["q2", "q3"]}}, "inputs": []},
         "b": {**WORDS, "inputs": []}, "both": top(2, inputs=["a", "b"])},
        ["a", "b", "both"],
        lambda t: [row for r in expected_rows(t, lambda r: r["rank"] <= 2)
                   for row in ([r] if r[0] == "q1" else [(r[0], r[1], None), r] if r[1] in RANK_ONE[r[0]] else [])],
        {"a": 18, "b": 18, "both": 30},
    ),
    "shared_step": (
        {"words": WORDS, "left": top(3, inputs=["words"]), "right": {**TITLE_WORDS, "inputs": ["words"]},
         "join": top(1, inputs=["left", "right"])},
        ["words", "left", "right", "join"],
        lambda t: expected_rows(t, lambda r: r["rank"] == 1),
        {"words": 18, "left": 18, "right": 18, "join": 27},
    ),
}
#: each sample query's rank-1 docno (sample_results(3, 6): six documents a query, in order)
RANK_ONE = {"q1": ["wv00000"], "q2": ["wv00060"], "q3": ["wv00120"]}
#: shapes with more than one step that no other step reads name their output (flows/spec.py)
OUTPUTS = {"branching": "second"}


def spec_of(shape: str) -> FlowSpec:
    return FlowSpec.parse({"name": shape, "steps": SHAPES[shape][0],
                           **({"output": OUTPUTS[shape]} if shape in OUTPUTS else {})})


@pytest.mark.parametrize("shape", SHAPES)
def test_flow_shape(shape, make_executor):
    _, order, expected, rows_in = SHAPES[shape]
    table = sample_results(3, 6)
    result = make_executor().run(spec_of(shape), table)
    out = result.table
    got = [(r["qid"], r["docno"], r.get("word_count")) for r in out.to_pylist()]
    assert got == expected(table)
    assert result.order == order
    assert {s: rec.rows_in for s, rec in result.steps.items()} == rows_in
    assert set(result.history) == set(order)
    assert result.history[order[-1]].equals(out)


@pytest.mark.ray
@pytest.mark.parametrize("keep_history", [True, False], ids=["history", "streaming"])
@pytest.mark.parametrize("shape", SHAPES)
def test_both_executors_give_identical_tables(shape, keep_history, ray_session):
    """The Ray Data executor against the local one on every shape: with history (each step its own stage)
    and without (streaming, row steps fused into one stage)."""
    from flows.executors.ray_data import RayDataExecutor

    spec = spec_of(shape)
    table = sample_results(3, 6)
    local = LocalExecutor(keep_history=keep_history).run(spec, table)
    on_ray = RayDataExecutor(keep_history=keep_history).run(spec, table)
    assert on_ray.executor == "ray" and local.executor == "local"
    assert on_ray.table.equals(local.table)
    assert on_ray.order == local.order
    fused = [k for k in on_ray.timings.summary() if k.startswith("fused:")]
    if keep_history:
        assert not fused  # each step is its own stage, and each one's table is the local one's
        assert list(on_ray.history) == list(local.history)
        for step, step_table in local.history.items():
            assert on_ray.history[step].equals(step_table), step
    elif shape in ("linear", "branching"):
        assert fused, "the streaming run fused no row steps"  # words + titles are one stage


def test_branches_from_one_step_cannot_change_each_others_data(make_executor):
    spec = FlowSpec.parse({"name": "iso", "steps": {
        "words": WORDS,
        "overwrite": {"op": "preprocess.stem", "inputs": ["words"]},  # rewrites text in place
        "reader": {"op": "analyze.word_count", "params": {"output_column": "n2"}, "inputs": ["words"]},
        "join": top(6, inputs=["overwrite", "reader"]),
    }})
    table = sample_results(2, 3)
    result = make_executor().run(spec, table)
    reader = result.history["reader"]
    assert reader.column("text").to_pylist() == table.column("text").to_pylist()
    assert reader.column("n2").to_pylist() == [len(t.split()) for t in table.column("text").to_pylist()]
    stemmed = result.history["overwrite"].column("text").to_pylist()
    assert stemmed != table.column("text").to_pylist() and all(t == t.lower() for t in stemmed)
    assert result.history["words"].column("text").to_pylist() == table.column("text").to_pylist()


def test_saved_yaml_flow_runs_the_same_with_each_step_once(tmp_path, make_executor):
    steps, order, _, _ = SHAPES["shared_step"]
    spec = FlowSpec.parse({"name": "saved", "steps": steps})
    table = sample_results(3, 6)
    before = make_executor().run(spec, table)
    loaded = FlowSpec.load(spec.save(tmp_path / "saved.yaml"))
    after = make_executor().run(loaded, table)
    assert after.table.equals(before.table)
    assert after.order == order
    assert all(rec.rows_in == 18 for s, rec in after.steps.items() if s != "join")


def test_progress_reaches_every_step(make_executor):
    events = []
    spec = FlowSpec.parse({"name": "p", "steps": SHAPES["linear"][0]})
    make_executor().run(spec, sample_results(3, 6), progress=events.append)
    assert events[-1].finished and events[-1].steps_done == events[-1].steps_total == 3
    rows = [e.rows_done for e in events]
    assert rows == sorted(rows) and rows[-1] >= 18 * 2
    assert {e.step for e in events if e.step} == {"words", "titles", "top"}


def test_fan_in_of_incompatible_branches_names_the_step(make_executor):
    from operators.errors import OperatorError

    spec = FlowSpec.parse({"name": "bad", "steps": {  # title: a core column (text) written as a count is refused
        "count_into_title": {"op": "analyze.word_count", "params": {"output_column": "title"}, "inputs": []},
        "plain": {**WORDS, "inputs": []},  # by the step that writes it (tests/operators/test_output_data_model.py)
        "join": top(2, inputs=["count_into_title", "plain"]),
    }})
    with pytest.raises(OperatorError, match="title") as err:
        make_executor().run(spec, sample_results(2, 3))
    assert err.value.step == "join" and "cannot union the outputs of count_into_title, plain: " in str(err.value)


def test_local_executor_stops_at_the_next_batch_when_cancelled():
    from flows.progress import CancelToken
    from operators.errors import FlowCancelled

    token = CancelToken()
    seen = []

    def progress(event):
        seen.append(event)
        if event.rows_done >= 10:
            token.cancel("user asked")

    spec = FlowSpec.parse({"name": "cancel", "steps": {"words": {**WORDS, "batch_size": 2}, "top": top(1)}})
    with pytest.raises(FlowCancelled, match="user asked") as err:
        LocalExecutor().run(spec, sample_results(3, 10), progress=progress, cancel=token)
    assert err.value.step == "words"
    assert seen[-1].rows_done == 10 and not seen[-1].finished
