"""The next shard embedded on a thread of its own while the driver commits the one before it (``--executor local``).

Shards go to the thread and results come back through ``queue.SimpleQueue``s: C code, whose lock is never held
while Python code runs, so the driver's wait holds no lock that the thread needs, wherever a Ctrl-C lands. With a
``ThreadPoolExecutor`` the driver waited in ``Future.result``, under the future's ``threading.Condition``, whose
``__enter__``, ``wait`` and ``__exit__`` are Python code around the lock, and a ``KeyboardInterrupt`` raised in
there can leave it held. Once, a ``tessera ingest`` did not end after Ctrl-C: an hour later its thread still waited
for that future's lock in ``Future.set_exception`` (only the driver could hold it), and the driver, in the
interpreter's exit, for the thread.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable


class Ahead:
    """``work(shard)`` for each ``submit``ted shard, in order, on one thread; ``result()`` returns or raises what the
    oldest unread one did. ``close()`` lets the thread end after the shard it is on."""

    def __init__(self, work: Callable[[str], Any]) -> None:
        self._work = work
        self._todo: queue.SimpleQueue = queue.SimpleQueue()
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        # not a daemon: the interpreter's exit waits for the encoder call under way (torch running while Python
        # finalises aborted the process)
        self._thread = threading.Thread(target=self._run, name="tessera-ingest")
        self._thread.start()

    def submit(self, shard: str) -> None:
        self._todo.put(shard)

    def result(self) -> Any:
        ok, value = self._done.get()
        if not ok:
            raise value
        return value

    def close(self, wait: bool = True) -> None:
        """No more shards: the thread ends after its current one (``wait``: and is waited for)."""
        self._todo.put(None)
        if wait:
            self._thread.join()

    def _run(self) -> None:
        while (shard := self._todo.get()) is not None:
            try:
                self._done.put((True, self._work(shard)))
            except BaseException as err:  # noqa: BLE001  (raised on the driver by result())
                self._done.put((False, err))
