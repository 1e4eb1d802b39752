"""A call to a server is litellm's async call (``operators.llm.whole_call``), where litellm's Router keeps a
deployment's ``max_parallel_requests`` (derived from ``rpm`` or ``tpm`` when not set) and refuses a call past it
with a 429 instead of waiting. The gateway keeps the alias's ``max_parallel_requests`` itself (``_slot``), so the
Router must refuse nothing: before, 16 threads on an alias with ``rpm: 4`` lost 12 calls, and a call abandoned at its
``total_timeout`` still held litellm's slot when the next call of a ``max_parallel_requests: 1`` alias came."""

from __future__ import annotations

import threading
import time

import pytest

from operators.llm import LLMError, complete


def _held_calls(server, count: int, model: str) -> list[str]:
    """``count`` calls at once to ``model`` (the ``slow`` scenario, held until all are in or done); their errors."""
    errors: list[str] = []
    server.hold_from = 1

    def call() -> None:
        try:
            complete("Which insects make honey?", model=model, timeout=30, num_retries=0)
        except LLMError as err:
            errors.append(err.message)

    callers = [threading.Thread(target=call) for _ in range(count)]
    for caller in callers:
        caller.start()
    until = time.monotonic() + 60  # (a bound on the wait, not an assertion: the counts below say what happened)
    while (server.in_flight[server.generation] < count and any(c.is_alive() for c in callers)
           and time.monotonic() < until):
        time.sleep(0.02)
    server.release.set()
    for caller in callers:
        caller.join()
    return errors


@pytest.mark.parametrize("limit", [{"rpm": 2}, {"tpm": 100}])
def test_an_aliass_rpm_or_tpm_does_not_refuse_calls_past_it_at_once(fault_models, tmp_path, monkeypatch, limit):
    monkeypatch.setenv("TESSERA_MODELS", str(fault_models.models_file(tmp_path / "limited.yaml", **limit)))
    errors = _held_calls(fault_models, 6, "fault-slow")
    assert errors == [] and fault_models.peak == 6, (errors[:1], fault_models.peak)  # (was 2 and 4 errors; 1 and 5)
    # (the alias's max_parallel_requests still holds: tests/operators/llm/test_gateway.py)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_call_after_one_abandoned_at_its_total_timeout_gets_the_slot(fault_models, tmp_path, monkeypatch, streamed):
    monkeypatch.setenv("TESSERA_MODELS", str(fault_models.models_file(tmp_path / "one.yaml", max_parallel_requests=1)))
    fault_models.pace = 0.05
    for _ in range(4):  # (the old code lost the next call about 6 times in 10)
        fault_models.delay = 20.0
        with pytest.raises(LLMError) as err:
            complete("Which insects make honey?", model="fault-trickle", timeout=30, num_retries=0, total_timeout=0.3,
                     on_text=(lambda _: None) if streamed else None)
        assert "total_timeout" in err.value.message, err.value.message
        fault_models.delay = 0.1
        done = complete("Which insects make honey?", model="fault-trickle", timeout=30, num_retries=0,
                        on_text=(lambda _: None) if streamed else None)
        assert done.text.endswith(fault_models.reply.split()[-1]) and done.finish_reason == "stop", done
