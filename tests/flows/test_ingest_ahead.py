"""The local ingestion's embedding thread (``flows.ingestion.ahead``): results in order, a shard's error raised on the
driver, and a Ctrl-C while the driver waits leaving nothing that the thread then waits for (the thread pool's
``Future`` could: an ingest hung for ever after Ctrl-C); and a Ctrl-C that Python drops still stopping the run
(``flows.commands.ingest_interrupt``). The end-to-end Ctrl-C of ``tessera ingest`` is in test_ingest_interrupt.py."""

from __future__ import annotations

import os
import signal
import threading
import time
import weakref

import pytest

from flows.commands.ingest_interrupt import StopOnInterrupt
from flows.ingestion.ahead import Ahead


def test_results_come_in_order_and_an_error_is_raised_on_the_driver():
    def work(shard: str) -> str:
        if shard == "bad":
            raise ValueError(f"cannot embed {shard}")
        return shard.upper()

    ahead = Ahead(work)
    for shard in ("a", "bad", "c"):
        ahead.submit(shard)
    assert ahead.result() == "A"
    with pytest.raises(ValueError, match="cannot embed bad"):
        ahead.result()
    assert ahead.result() == "C"
    ahead.close()
    assert not ahead._thread.is_alive()


def test_a_ctrl_c_while_the_driver_waits_lets_the_thread_end_after_its_shard():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run on the main thread only, and this test runs on another")
    started, release = threading.Event(), threading.Event()

    def work(shard: str) -> str:
        started.set()
        release.wait(10)  # an encoder call under way
        return shard

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    ahead = Ahead(work)
    try:
        ahead.submit("s1")
        started.wait(10)
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()  # Ctrl-C, as a terminal sends it
        with pytest.raises(KeyboardInterrupt):
            ahead.result()
    finally:
        signal.signal(signal.SIGINT, previous)
    ahead.close(wait=False)
    release.set()
    ahead._thread.join(10)
    assert not ahead._thread.is_alive()  # it finished its shard and read the close
    assert ahead.result() == "s1"  # what it finished is still there to read (nothing reads it after a Ctrl-C)


def test_a_ctrl_c_that_lands_in_a_callback_which_drops_exceptions_still_stops_the_run(capsys):
    """Python runs the signal handler wherever the main thread is; in a weakref callback (importlib's module lock has
    one) its KeyboardInterrupt was printed as "Exception ignored" and dropped, and the ingestion ran to its end."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run on the main thread only, and this test runs on another")

    class Lock:
        pass

    previous = signal.getsignal(signal.SIGINT)
    stop = StopOnInterrupt(resume="tessera ingest --source corpus.jsonl --index idx")
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt), stop:
            lock = Lock()
            landed = []
            ref = weakref.ref(lock, lambda _: (landed.append(1), os.kill(os.getpid(), signal.SIGINT)))
            del lock  # the callback runs, and the Ctrl-C's handler within it: its exception is dropped
            assert landed
            time.sleep(5)  # the encoder call under way: the Ctrl-C, raised again, ends it
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 4
    assert "Exception ignored" not in capsys.readouterr().err
    assert stop.signum == signal.SIGINT and ref() is None
