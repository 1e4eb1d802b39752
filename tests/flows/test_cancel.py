"""A cancel stops a step between its model batches, not only between the executor's batches."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from pydantic import BaseModel, ConfigDict, Field

from flows.executors.local import LocalExecutor
from flows.progress import CancelToken
from flows.spec import Flow, FlowSpec, StepSpec
from operators.base import Operator
from operators.errors import FlowCancelled
from operators.interrupt import checkpoint

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.integration
def test_a_model_step_stops_at_the_next_forward_pass_after_a_cancel():
    """400 texts in one executor batch are 25 forward passes of 16: the cancel made during the third
    pass is honoured before the fourth (the model's own pre-hook), not after the 25th."""
    from operators.models import DEFAULT_ENCODER, load_sentence_transformer

    model = load_sentence_transformer(DEFAULT_ENCODER)  # the process's shared instance, as the step loads it
    token, passes = CancelToken(), []

    def count(module, args):
        passes.append(1)
        if len(passes) == 3:
            token.cancel("stop")

    texts = pa.table({"qid": [str(i) for i in range(400)], "query": [f"honey bees, item {i}" for i in range(400)],
                      "text": [f"bees make honey {i}" for i in range(400)]})
    spec = FlowSpec.parse({"name": "embed", "steps": {"emb": {"op": "embed.sentence_transformer",
                                                               "batch_size": 1000}}})
    hook = model.register_forward_pre_hook(count)  # after Tessera's hook, so the check sees the cancel next pass
    try:
        with pytest.raises(FlowCancelled) as err:
            LocalExecutor().run(spec, texts, cancel=token)
    finally:
        hook.remove()
    assert len(passes) == 3 and err.value.step == "emb" and "stop" in str(err.value)
    again = LocalExecutor().run(spec, texts.slice(0, 5))  # the model is not left in a cancelled state
    assert again.table.num_rows == 5


class SlowModel(Operator):
    """Pass rows through after ``passes`` 'forward passes' of ``seconds`` each, checking between them and
    appending a line to ``trace`` per pass, so that a test sees how far the batch got."""

    name = "test.slow_model"
    cacheable = False

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        passes: int = Field(40, description="Forward passes per call.")
        seconds: float = Field(0.25, description="Seconds per pass.")
        trace: str = Field(..., description="File that gets one line per pass.")

    def transform(self, table: pa.Table) -> pa.Table:
        for _ in range(self.params.passes):
            checkpoint()  # what a model's forward pre-hook does
            with open(self.params.trace, "a") as trace:
                trace.write("pass\n")
            time.sleep(self.params.seconds)
        return table


def _passes(trace) -> int:
    return len(trace.read_text().splitlines()) if trace.exists() else 0


@pytest.mark.ray
def test_a_ray_step_stops_within_its_batch(ray_session, tmp_path):
    """The cancel is made once the actor is inside its one 20-second batch; the batch stops there
    (far fewer than its 400 passes) and no pass runs after ``run`` has returned. Counted, not timed."""
    from flows.executors.ray_data import RayDataExecutor

    trace = tmp_path / "passes.txt"
    op = SlowModel({"passes": 400, "seconds": 0.05, "trace": str(trace)}, step_id="slow")
    spec = FlowSpec(name="slow", steps={"slow": StepSpec(op=op.name, params=op.params.model_dump(), concurrency=1)})
    flow = Flow(spec=spec, order=["slow"], inputs={"slow": ()}, operators={"slow": op}, output="slow")
    token = CancelToken()

    def cancel_inside_the_batch():
        deadline = time.monotonic() + 120
        while _passes(trace) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        token.cancel("stop")

    threading.Thread(target=cancel_inside_the_batch, daemon=True).start()
    with pytest.raises(FlowCancelled) as err:
        RayDataExecutor().run(flow, pa.table({"qid": ["1"], "query": ["bees"]}), cancel=token)
    passes_at_return = _passes(trace)
    time.sleep(1.0)
    assert 2 <= passes_at_return < 400 and _passes(trace) == passes_at_return
    assert err.value.step == "slow" and "stop" in str(err.value)


def test_a_cancel_token_prints_whether_it_was_cancelled_and_why():
    """It printed as ``<flows.progress.CancelToken object at 0x...>``."""
    token = CancelToken()
    assert repr(token) == "CancelToken(not cancelled)"
    token.cancel("the user left")
    assert repr(token) == "CancelToken(cancelled: 'the user left')"
