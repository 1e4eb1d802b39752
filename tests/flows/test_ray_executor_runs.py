"""How the Ray Data executor runs a flow: CPU steps as tasks, a worker's setup kept across runs, two runs at once,
the step cache shared with the local executor, progress while the run goes, cancel, and a progress callback that fails.

Its operators are shipped to the Ray workers by value, as test_ray_executor.py's are; its flows and checks are
ray_flows.py's, which test_ray_executor.py shares.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

import pyarrow as pa
import pytest
from pydantic import BaseModel, ConfigDict, Field

from flows.executors.local import LocalExecutor
from flows.progress import CancelToken, ProgressEvent
from flows.spec import FlowSpec
from operators.base import Operator
from operators.errors import FlowCancelled
from operators.registry import all_operators
from operators.tables import set_column
from operators.testing import SAMPLE_CORPUS

ray = pytest.importorskip("ray")
from ray import cloudpickle  # noqa: E402

from flows.executors.ray_data import RayDataExecutor  # noqa: E402
pytest.register_assert_rewrite("tests.flows.ray_flows")  # its asserts say what differs, as a test module's do
from tests.flows.ray_flows import BRANCHES, LINEAR, RESULTS, assert_same, flow_by_hand  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]  # the session's local Ray (conftest)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


# -- operators for these tests only ---------------------------------------------------


class SetupCount(Operator):
    """An operator that writes, per row, its worker's pid and how often ``setup`` ran there (counted in the
    process's environment, which outlives any one instance)."""

    name = "test.setup_count"
    cacheable = False

    def setup(self) -> None:
        os.environ["TESSERA_TEST_SETUPS"] = str(int(os.environ.get("TESSERA_TEST_SETUPS", "0")) + 1)

    def produces(self) -> dict[str, str]:
        return {"pid": "data", "setups": "data"}

    def transform(self, table: pa.Table) -> pa.Table:
        table = set_column(table, "pid", pa.array([os.getpid()] * table.num_rows, pa.int64()))
        return set_column(table, "setups", pa.array([int(os.environ["TESSERA_TEST_SETUPS"])] * table.num_rows))


class Slow(Operator):
    """Sleep per call, then pass rows through."""

    name = "test.slow"
    cacheable = False

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        seconds: float = Field(0.2, description="Seconds to sleep per call.")
        trace: str | None = Field(None, description="File that gets one line per call, to count calls.")

    def transform(self, table: pa.Table) -> pa.Table:
        if self.params.trace:
            with open(self.params.trace, "a") as trace:
                trace.write("call\n")
        time.sleep(self.params.seconds)
        return table


CACHED = {"name": "cached", "steps": {
    "words": {"op": "analyze.word_count", "batch_size": 5},
    "top": {"op": "postprocess.reduce", "params": {"k": 5}, "batch_size": 8},
}}


def _cached(concurrency: int | None = None, **top_params) -> FlowSpec:
    extra = {"concurrency": concurrency} if concurrency else {}
    steps = {s: {**step, **extra} for s, step in CACHED["steps"].items()}
    steps["top"]["params"] = {**steps["top"]["params"], **top_params}
    return FlowSpec.parse({**CACHED, "steps": steps})


def test_cpu_steps_run_as_tasks_and_two_runs_at_once_keep_their_own_records():
    import threading

    from flows.executors.ray_plan import runs_as_tasks

    linear = FlowSpec.parse(LINEAR).build()
    assert all(runs_as_tasks(linear, (step,)) for step in linear.order)  # word counts and top-k load nothing
    mixed = FlowSpec.parse({"name": "mixed", "steps": {
        "read": {"op": "sources.jsonl", "params": {"path": str(SAMPLE_CORPUS)}},  # reads a file: no setup
        "stem": {"op": "preprocess.stem"},  # a stemmer, kept by each worker process
        "language": {"op": "analyze.language"},  # lingua's models, kept by each worker process
        "embed": {"op": "embed.sentence_transformer"},  # a model, kept by each worker process
        "gpu": {"op": "embed.sentence_transformer", "num_gpus": 1},  # a GPU task's worker would exit after it
        "words": {"op": "analyze.word_count", "concurrency": 2},  # a fixed number of actors was asked for
    }}).build()
    assert all(runs_as_tasks(mixed, stage) for stage in (("read", "stem"), ("language",), ("stem", "embed")))
    assert not any(runs_as_tasks(mixed, stage) for stage in (("gpu",), ("words",)))
    # both runs report to the driver's one reporter actor; each must get its own batches only
    results: dict[str, Any] = {}
    runs = [threading.Thread(target=lambda s=spec: results.setdefault(s["name"], RayDataExecutor().run(
        FlowSpec.parse(s), RESULTS))) for spec in (LINEAR, BRANCHES)]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join()
    for spec in (LINEAR, BRANCHES):
        assert_same(LocalExecutor().run(FlowSpec.parse(spec), RESULTS), results[spec["name"]])


def test_a_setup_runs_once_per_worker_process_across_batches_and_runs():
    flow = flow_by_hand("setup", [("count", SetupCount(), None)], count={"batch_size": 2})
    seen: dict[int, set[int]] = {}
    for _ in range(2):
        result = RayDataExecutor().run(flow, RESULTS)
        assert result.table.num_rows == RESULTS.num_rows
        assert result.table.drop_columns(["pid", "setups"]).equals(LocalExecutor().run(flow, RESULTS).table
                                                                   .drop_columns(["pid", "setups"]))
        for pid, setups in zip(result.table.column("pid").to_pylist(), result.table.column("setups").to_pylist()):
            seen.setdefault(pid, set()).add(setups)
    assert os.getpid() not in seen  # it ran on Ray's workers, as tasks over 12 batches of 2 rows
    assert all(counts == {1} for counts in seen.values()), seen  # set up once in each, kept between runs


@pytest.mark.slow  # three Ray Data runs with fresh actor pools (about a minute on 2 cores); make test keeps
# test_local_and_ray_share_the_step_cache, which checks hits on Ray with one pool size
def test_step_cache_hits_the_same_with_one_or_two_actors(cache):
    first = RayDataExecutor(cache=cache, keep_history=False).run(_cached(1), RESULTS)
    assert {s: r.hit_ratio for s, r in first.steps.items()} == {"words": 0.0, "top": 0.0}
    for concurrency in (1, 2):
        again = RayDataExecutor(cache=cache, keep_history=False).run(_cached(concurrency), RESULTS)
        assert {s: r.hit_ratio for s, r in again.steps.items()} == {"words": 1.0, "top": 1.0}
        assert again.table.equals(first.table)
        for step, record in again.steps.items():  # the same units, all of them hits
            before = first.steps[step]
            assert (record.rows_in, record.rows_out, record.units) == (before.rows_in, before.rows_out, before.units)
            assert record.hits == record.units > 0


def test_local_and_ray_share_the_step_cache(cache):
    local = LocalExecutor(cache=cache).run(_cached(), RESULTS)
    result = RayDataExecutor(cache=cache, keep_history=False).run(_cached(), RESULTS)
    assert result.cache_hit_ratio == 1.0 and result.table.equals(local.table)
    ray_first = RayDataExecutor(cache=cache, keep_history=False).run(_cached(k=4), RESULTS)
    assert {s: r.hit_ratio for s, r in ray_first.steps.items()} == {"words": 1.0, "top": 0.0}
    local_again = LocalExecutor(cache=cache).run(_cached(k=4), RESULTS)
    assert local_again.cache_hit_ratio == 1.0 and local_again.table.equals(ray_first.table)


def test_progress_events_arrive_while_the_run_goes():
    events: list[ProgressEvent] = []
    flow = flow_by_hand("slow", [
        ("slow", Slow({"seconds": 0.05}), None),
        ("words", all_operators()["analyze.word_count"](), None),
    ], slow={"batch_size": 4, "concurrency": 1})
    result = RayDataExecutor().run(flow, RESULTS, progress=events.append)
    rows = [e.rows_done for e in events]
    assert rows == sorted(rows) and rows[-1] == 2 * RESULTS.num_rows
    assert len({e.rows_done for e in events if e.step == "slow"}) >= RESULTS.num_rows // 4  # batch by batch
    assert [e.steps_done for e in events] == sorted(e.steps_done for e in events)
    last = events[-1]
    assert last.finished and last.steps_done == last.steps_total == 2
    assert result.steps["slow"].rows_out == RESULTS.num_rows


def test_cancel_stops_the_run_before_its_remaining_batches(tmp_path):
    """24 one-row batches of half a second each; the cancel after the first batch stops the run with
    most of them never started, and no batch starts after ``run`` has returned. Counted, not timed."""
    trace = tmp_path / "calls.txt"
    calls = lambda: len(trace.read_text().splitlines()) if trace.exists() else 0  # noqa: E731
    token = CancelToken()

    def cancel_once_rows_flow(event: ProgressEvent) -> None:
        if event.rows_done:
            token.cancel("stop")

    flow = flow_by_hand("cancel", [("slow", Slow({"seconds": 0.5, "trace": str(trace)}), None)],
                 slow={"batch_size": 1, "concurrency": 1})
    with pytest.raises(FlowCancelled) as err:
        RayDataExecutor().run(flow, RESULTS, progress=cancel_once_rows_flow, cancel=token)
    calls_at_return = calls()
    time.sleep(1.0)
    assert token.cancelled, "no batch was reported before the cancel"
    assert 1 <= calls_at_return < RESULTS.num_rows and calls() == calls_at_return
    assert err.value.step == "slow" and "stop" in str(err.value)
    # nothing is left holding the cluster's CPUs: the stage's actor goes at once, not when garbage is next collected
    deadline = time.monotonic() + 5  # Ray's view of free CPUs lags by about 0.1 s
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ray.available_resources().get("CPU", 0) == ray.cluster_resources()["CPU"]
    queries = pa.table({"qid": ["q1"], "query": ["two words"]})
    after = RayDataExecutor().run(FlowSpec.parse({"name": "after", "steps": {
        "words": {"op": "analyze.word_count", "params": {"input_column": "query"}}}}), queries)
    assert after.table.column("word_count").to_pylist() == [2]


def test_a_failing_progress_callback_stops_the_run_and_leaves_no_stage_running():
    """The caller's error comes back, and the run's worker thread has ended before it does: a stage
    left running would hold the cluster's CPUs and log into a closed stream after the run is gone."""
    import threading

    def broken(event: ProgressEvent) -> None:
        if event.rows_done:
            raise RuntimeError("the progress display broke")

    flow = flow_by_hand("broken", [("slow", Slow({"seconds": 0.2}), None)], slow={"batch_size": 1, "concurrency": 1})
    with pytest.raises(RuntimeError, match="progress display broke"):
        RayDataExecutor().run(flow, RESULTS, progress=broken)
    assert [t.name for t in threading.enumerate() if t.name.startswith("tessera-ray-")] == []


@pytest.mark.timeout(240)  # the run waited for ever before
def test_a_step_asking_for_more_cpus_than_a_node_has_runs_with_the_nodes(caplog):
    """``num_cpus: 3`` on the session's 2-CPU Ray: Ray places no task that asks for more CPUs than a node has, and the
    run waited for ever (fused, the stage took the most of its steps'). Capped at 2 with a warning naming the step,
    as a ``num_gpus`` above the cluster's is dropped; the local executor runs it as it is."""
    spec = FlowSpec.parse({"name": "cpus3", "steps": {
        "count": {"op": "analyze.word_count", "params": {"input_column": "query", "output_column": "n"}},
        "wc": {"op": "analyze.word_count", "num_cpus": 3, "params": {"input_column": "query"}}}})
    queries = ["honey bees", "gothic cathedrals"]
    for keep_history, given in ((True, queries), (False, queries), (False, [])):  # fused after `count` without history
        local = LocalExecutor().run(spec, given)
        with caplog.at_level(logging.WARNING, logger="flows.executors.ray_plan"):
            assert RayDataExecutor(keep_history=keep_history).run(spec, given).table.equals(local.table)
        assert "step 'wc' asks for 3 CPU(s) per task but the Ray cluster's largest node has 2: running it with 2" \
               in caplog.text
        caplog.clear()
