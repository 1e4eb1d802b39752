"""Writers killed outright, for the tests of what they leave: a real child process stopped mid-write (to be sent
SIGKILL), a pid that no process has any more, and a file's age set back with ``os.utime``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable


def forked_writer(write: Callable[[Callable[[], None]], object]) -> int:
    """A child process running ``write(ready)``; ``write`` calls ``ready()`` once it is mid-write, then waits (until
    the test kills it). Returns the child's pid once it is ready. The child exits without Python's or pytest's
    cleanup."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            write(lambda: os.write(ready_w, b"1"))
        finally:
            os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    return pid


def dead_pid() -> int:
    """A pid that no process has now (a child that has exited and been reaped)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def backdate(path: Path, seconds: float) -> None:
    """``path`` and everything under it last changed ``seconds`` ago."""
    then = time.time() - seconds
    for p in [path, *path.rglob("*")]:
        os.utime(p, (then, then), follow_symlinks=False)
