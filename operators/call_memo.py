"""A batch's finished model calls, kept as each one finishes, so a cancel mid-batch loses none of them.

The step cache stores a batch's output when the whole batch is done; a Ctrl-C (a cancel, a
``KeyboardInterrupt``) in the middle of an LLM step's batch of 200 rows used to throw away
every call that had already been answered (and paid for), and a rerun made them again. So
while a step runs with the step cache, the runner (``flows.runner``) puts a ``CallMemo`` in
force on its thread; ``complete_many`` reads each call back from it before sending it, and
records each reply the moment it arrives. Operators know the memo only through this
protocol; the step cache behind it is the engine's (``flows.cache_calls``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, ContextManager, Protocol, Sequence

from operators.thread_value import ThreadValue


class CallMemo(Protocol):
    """Where a batch's finished calls are kept: by a call's id (``call_id``), a JSON-able dict."""

    def recall(self, calls: Sequence[bytes]) -> dict[bytes, dict[str, Any]]:
        """The kept replies among ``calls``."""

    def record(self, call: bytes, reply: dict[str, Any]) -> None:
        """Keep ``reply`` to ``call`` (now, before the batch ends)."""


_memo: ThreadValue[CallMemo] = ThreadValue()


def remembering(memo: CallMemo | None) -> ContextManager[None]:
    """Within this block, on this thread, calls are read back from and recorded in ``memo`` (None: not kept)."""
    return _memo.holding(memo)


def current_memo() -> CallMemo | None:
    """This thread's memo (read it on the calling thread, then hand it to the pool's threads)."""
    return _memo.get()


def call_id(**parts: Any) -> bytes:
    """An id for one call from what decides its reply (the model, the prompt, the options)."""
    data = json.dumps(parts, sort_keys=True, default=str).encode("utf-8")
    return hashlib.blake2b(data, digest_size=16).digest()
