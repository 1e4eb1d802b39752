"""The driver's side of a Ray ingestion, beside the stages of ``ray_pipeline``: the embed actors' documents
passed to ``on_embedded`` as they arrive (``EmbedProgress``), the result batches read on a thread of their own
that a lost node or Ctrl-C stops (``result_batches``), and no new local cluster started by a Ray thread at exit
(``no_auto_init_at_exit``). Nothing here is shipped to a Ray worker."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Callable, Iterator

import pyarrow as pa

from flows.executors.ray_env import running_executors
from flows.ingestion.errors import IngestError

#: Seconds between two looks at what the embed actors reported.
POLL_SECONDS = 0.5
#: Seconds the driver waits for the results thread once it stopped the dataset (Ctrl-C, an error).
STOP_SECONDS = 10.0


class EmbedProgress:
    """On the driver: what the embed actors report, passed to ``on_embedded`` by a thread every
    ``POLL_SECONDS``, and by ``deliver()`` on demand (one at a time, so nothing is passed twice)."""

    def __init__(self, on_embedded: Callable[[str, int], None] | None):
        from flows.executors.ray_progress import ReportLine

        self.on_embedded = on_embedded
        self.line = ReportLine() if on_embedded is not None else None
        self._lock = threading.Lock()
        self._moved = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="tessera-ingest-progress", daemon=True)

    def sender(self):
        return self.line.sender() if self.line is not None else None

    def __enter__(self) -> "EmbedProgress":
        if self.line is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.line is not None:
            self.line.close()

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self.deliver()

    def deliver(self) -> None:
        import ray

        if self.line is None:
            return
        with self._lock, contextlib.suppress(ray.exceptions.RayError):
            for shard, docs in self.line.receive():
                self._moved = True
                self.on_embedded(shard, docs)

    def moved(self) -> bool:
        """Whether documents were embedded since the last call."""
        moved, self._moved = self._moved, False
        return moved


def result_batches(ds, progress: EmbedProgress) -> Iterator[pa.Table]:
    """``ds``'s result batches, read on a thread of their own so that the driver notices a node that died
    under work the nodes left cannot take over (``NodeWatch``): an ``IngestError`` instead of a job that
    waits for ever. Committed shards stay; the same command resumes the rest. The reader stays at most one
    batch ahead, and closing this generator (the caller failed, or the node watch did) stops the dataset."""
    from flows.executors.ray_nodes import NodeWatch

    watch = NodeWatch()
    results: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def offer(item: tuple) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                results.put(item, timeout=POLL_SECONDS)
                return True
        return False

    def read() -> None:
        if stop.is_set():  # the driver gave up before the dataset started
            return
        batches = ds.iter_batches(batch_size=None, batch_format="pyarrow")
        try:
            for batch in batches:
                if not offer(("batch", batch)):
                    return
            offer(("end", None))
        except BaseException as err:  # handed to the driver's thread
            offer(("error", err))
        finally:
            with contextlib.suppress(Exception):
                batches.close()  # stops the dataset's execution when the driver gave up early

    reader = threading.Thread(target=read, name="tessera-ingest-results", daemon=True)
    reader.start()
    try:
        while True:
            try:
                kind, value = results.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if progress.moved():
                    watch.progress()
                if (lost := watch.lost()) is not None:
                    raise IngestError(f"Ray node {lost} died during the ingestion and the nodes left did not take "
                                      f"its work over in {watch.grace_s:.0f} s: the shards committed so far are in "
                                      "the index; run the same command again to resume the rest") from None
                continue
            if kind == "end":
                return
            if kind == "error":
                raise value
            watch.progress()
            yield value
    finally:
        stop.set()
        _stop(ds, reader)


def _stop(ds, reader: threading.Thread) -> None:
    """Stop ``ds``'s execution from this thread and wait (``STOP_SECONDS`` at most) for ``reader`` to end.

    The reader may be blocked inside the dataset's iterator, waiting for a shard, where closing the iterator
    cannot reach it (a generator cannot be closed while it runs): shutting the dataset's streaming executor
    down ends that wait, and its actors with it. Without this a Ctrl-C waited for the next shard (30 s and more),
    and Ray Data's threads, still running at exit, started a new Ray cluster after ``ray.shutdown``. The
    executor starts lazily in the reader, so it is looked for until the reader ends."""
    deadline = time.monotonic() + STOP_SECONDS
    while reader.is_alive() and time.monotonic() < deadline:
        for executor in _executors(ds):
            with contextlib.suppress(Exception):  # already shut down, or shutting down in the reader
                executor.shutdown(force=True)
        reader.join(POLL_SECONDS)


def _executors(ds) -> list:
    """The running Ray Data streaming executors of ``ds`` (``ray_env.running_executors``, each named after the
    dataset's run); should Ray Data's internals change, none are found and the reader is waited for
    (``STOP_SECONDS``)."""
    run = ds.get_dataset_id()
    return [t for t in running_executors() if getattr(t, "_dataset_id", None) == run]


def no_auto_init_at_exit() -> None:
    """At exit, before ``ray.shutdown``, turn off Ray's automatic ``ray.init``: a Ray thread that calls Ray after
    the shutdown then fails instead of starting a new local cluster while the process exits. atexit runs the
    last registered first, and Ray registers its shutdown when it is imported, before this."""
    import atexit

    atexit.unregister(_auto_init_off)
    atexit.register(_auto_init_off)


def _auto_init_off() -> None:
    """Ray reads ``RAY_ENABLE_AUTO_CONNECT`` once, at import, into this flag (``ray._private.auto_init_hook``)."""
    from ray._private import auto_init_hook

    auto_init_hook.enable_auto_connect = False
