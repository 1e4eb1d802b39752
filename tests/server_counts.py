"""Counts kept by the tests' own HTTP servers, read once the server has caught up with the client.

A client that gives up on a request after a read timeout may be gone before the server's thread for that request has
read it (two busy cores), so the server's count of attempts lags the client's for a moment: a test reads it once it
reaches what the client says it sent, or ``seconds`` have passed, and then asserts it (a count past it still fails).
"""

from __future__ import annotations

import time
from collections.abc import Callable


def settled(count: Callable[[], int], expected: int, seconds: float = 10) -> int:
    """``count()`` once it reaches ``expected``, or its value after ``seconds``."""
    deadline = time.monotonic() + seconds
    while (seen := count()) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return seen
