"""A cancel (Ctrl-C, a cancelled task, a failed progress callback) of a Ray run whose stage waits for CPUs that another
holder has: it waited for ever, since the cancel is seen by a batch and no batch ran. Now the run's Ray Data executions
are shut down after ``CANCEL_GRACE_SECONDS`` (a source's read waiting in its execution), and after twice that the run
ends without its worker thread, stuck in Ray Data's own ``ray.get`` of the input's metadata; that thread ends at its
next look at the cancel, once the CPUs are free, and a run after it gets them.

The session's 2-CPU Ray, all of whose CPUs an actor holds; the grace is 1 s here (5 s by default). A return at all is
what is checked (a test that hangs fails at its timeout), not how fast."""

from __future__ import annotations

import sys
import threading
import time

import pyarrow as pa
import pytest

from flows.progress import CancelToken
from flows.spec import FlowSpec
from operators.errors import FlowCancelled
from operators.testing import SAMPLE_CORPUS

ray = pytest.importorskip("ray")
from ray import cloudpickle  # noqa: E402

from flows.executors import ray_progress  # noqa: E402
from flows.executors.ray_data import RayDataExecutor  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]  # the session's local Ray (conftest)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

WORDS = {"op": "analyze.word_count", "params": {"input_column": "text"}}


@ray.remote
class Holder:
    """Holds the CPUs it was given for as long as it lives, as another job's actors would."""

    def ready(self) -> bool:
        return True


def run_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("tessera-ray-")]


@pytest.fixture
def cpus_held(monkeypatch):
    """Every CPU of the session's Ray held by an actor, once an earlier test's actors have let theirs go (Ray's view
    of free CPUs lags); the cancel grace cut to 1 s. Yields the holder."""
    monkeypatch.setattr(ray_progress, "CANCEL_GRACE_SECONDS", 1.0)
    holder = Holder.options(num_cpus=ray.cluster_resources()["CPU"]).remote()
    assert ray.get(holder.ready.remote(), timeout=90)  # placed only once all the CPUs are free
    assert ray.available_resources().get("CPU", 0) == 0
    yield holder
    ray.kill(holder)


@pytest.mark.timeout(120)  # the run waited for ever before
@pytest.mark.parametrize("steps, queries", [
    ({"docs": {"op": "sources.jsonl", "params": {"path": str(SAMPLE_CORPUS), "limit": 20}}, "words": WORDS},
     None),  # the source's read waits inside its Ray Data execution
    ({"words": {**WORDS, "params": {"input_column": "query"}}},
     pa.table({"qid": ["q1", "q2"], "query": ["two words", "three more words"]})),  # the input's metadata read waits
], ids=["source", "queries"])
def test_a_cancelled_run_whose_stage_waits_for_cpus_ends_and_frees_what_it_asked(cpus_held, steps, queries):
    token = CancelToken()
    threading.Timer(1.0, token.cancel, ("interrupted",)).start()
    with pytest.raises(FlowCancelled, match="interrupted"):
        RayDataExecutor().run(FlowSpec.parse({"name": "waits", "steps": steps}), queries, cancel=token)

    ray.kill(cpus_held)  # the CPUs free: a worker thread left waiting sees the cancel and ends, starting nothing
    deadline = time.monotonic() + 60
    while run_threads() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run_threads() == []
    after = RayDataExecutor().run(FlowSpec.parse({"name": "after", "steps": {
        "words": {**WORDS, "params": {"input_column": "query"}}}}), pa.table({"qid": ["q1"], "query": ["two words"]}))
    assert after.table.column("word_count").to_pylist() == [2]
