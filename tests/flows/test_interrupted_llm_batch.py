"""A Ctrl-C in the middle of an LLM step's batch keeps the calls that had finished: the rerun makes only the rest.

The local fault server (real HTTP on localhost) counts the calls; the step cache is a real one in tmp_path. The
interrupt is a real SIGINT to this process's main thread, taken by ``tessera run``'s handler (a cancel) or by
Python's own (a ``KeyboardInterrupt``, as in a notebook or a script).
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from contextlib import contextmanager

import pytest

from flows.commands._progress import cancel_on_interrupt
from flows.executors.local import LocalExecutor
from flows.progress import CancelToken
from flows.spec import FlowSpec
from operators.errors import FlowCancelled
from operators.testing import sample_results

ROWS = 6


def _spec() -> FlowSpec:
    return FlowSpec.parse({"name": "summaries", "steps": {"sum": {"op": "summarize.documents", "params": {
        "model": "fault-slow", "concurrency": 2, "num_retries": 0}}}})


def _interrupt_after(server, calls: int, ended: threading.Event, taken) -> threading.Thread:
    """SIGINT to the main thread once the server has seen ``calls`` calls (a Ctrl-C while the batch is under way);
    none once the run has ended (a run that failed otherwise must not end the test session). The server holds the
    calls after those (``hold_from``) until the interrupt is ``taken()``: however loaded the machine, the batch
    cannot end before the Ctrl-C lands, and the calls in flight then end, as a model's would."""
    main = threading.main_thread().ident

    def watch() -> None:
        deadline = time.monotonic() + 60  # the first call imports litellm: 5-8 s on 2 idle cores, more under load
        while sum(server.attempts.values()) < calls and time.monotonic() < deadline and not ended.is_set():
            time.sleep(0.005)
        if not ended.is_set():
            signal.pthread_kill(main, signal.SIGINT)
        while not (taken() or ended.is_set()) and time.monotonic() < deadline:
            time.sleep(0.005)
        server.release.set()

    return threading.Thread(target=watch, daemon=True)


@contextmanager
def _python_handler_noting(raised: threading.Event):
    """Python's own SIGINT handler (``signal.default_int_handler``: raise ``KeyboardInterrupt``) that notes in
    ``raised`` that it ran; the handler before is put back after."""
    def interrupt(signum, frame):
        raised.set()
        signal.default_int_handler(signum, frame)

    before = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("handler", ["tessera run", "python"])
def test_a_rerun_after_ctrl_c_mid_batch_makes_only_the_calls_that_had_not_finished(fault_models, cache, monkeypatch,
                                                                                    handler):
    """Before, the batch's finished calls went with it: the rerun made all 6 again (measured: 10 calls in all)."""
    monkeypatch.setattr(fault_models, "delay", 0.15)
    fault_models.hold_from = 4  # the 4th call on waits until the interrupt is taken: the batch cannot end before it
    fault_models.reply = "Bees make honey."
    table = sample_results(2, ROWS // 2)  # one batch of 6 rows
    token, ended = CancelToken(), threading.Event()
    raised = threading.Event()
    taken = (lambda: token.cancelled) if handler == "tessera run" else raised.is_set
    watcher = _interrupt_after(fault_models, 3, ended, taken)
    with pytest.raises(FlowCancelled if handler == "tessera run" else KeyboardInterrupt):
        try:
            if handler == "tessera run":
                with cancel_on_interrupt(token):
                    watcher.start()
                    LocalExecutor(cache=cache).run(_spec(), table, cancel=token)
            else:
                with _python_handler_noting(raised):
                    watcher.start()
                    LocalExecutor(cache=cache).run(_spec(), table)
        finally:
            ended.set()
    watcher.join()
    first = fault_models.attempts["slow"]
    assert 3 <= first < ROWS  # stopped mid-batch: the calls not yet started never went out

    again = LocalExecutor(cache=cache).run(_spec(), table)
    assert fault_models.attempts["slow"] == ROWS  # each row asked once over both runs, not ROWS + first
    assert again.table.column("summary").to_pylist() == ["Bees make honey."] * ROWS
    assert again.steps["sum"].usage["llm_calls"] == ROWS - first  # what this run spent; the rest read back
    assert sum(m["usage"]["sum"]["calls"] for m in again.metadata.values()) == ROWS  # what the summaries cost
    with sqlite3.connect(cache.root / "index.sqlite") as db:  # the call records went with the stored units
        assert db.execute("SELECT count(*) FROM units WHERE file IS NULL").fetchone() == (0,)
