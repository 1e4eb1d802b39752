"""Ctrl-C sent to a real ``tessera`` process (its process group, as a terminal does) and what a clean stop looks
like: shared by the ingest and bench interrupt tests. Timing is bounded loosely (``PROMPT_S``): the machine is
shared, and the point is a prompt stop rather than a wait for the whole job."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable

import pytest

from tests.text_checks import TRACEBACK

#: Seconds a stop may take at most here (a stop that waits for the whole job takes minutes).
PROMPT_S = 60.0


def interrupt_when(proc: subprocess.Popen, ready: Callable[[str], bool], *, after_s: float = 0.0,
                   twice: bool = False) -> tuple[list[str], float]:
    """Ctrl-C ``after_s`` seconds after the first stderr line that is ``ready`` (twice: again 0.2 s later);
    stderr's lines and the seconds from the (first) Ctrl-C to the exit."""
    lines = []
    for raw in proc.stderr:
        lines.append(raw.decode(errors="replace").rstrip("\n"))
        if ready(lines[-1]):
            break
    else:
        pytest.fail(f"the process ended before the moment to interrupt it: {lines}")
    time.sleep(after_s)
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    if twice:
        time.sleep(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    return lines + rest.decode(errors="replace").splitlines(), time.monotonic() - sent


def assert_interrupted(proc: subprocess.Popen, lines: list[str], seconds: float, *, resume: bool = False) -> None:
    """Status 130, one ``tessera:`` line, the last, and no traceback or abort, within ``PROMPT_S``; ``resume``: the
    line says the command that resumes the run (``tessera ingest``'s)."""
    assert proc.returncode == 130, lines
    said = "tessera: interrupted; what was committed stays: to resume, run the same command again: tessera " \
        if resume else "tessera: interrupted"
    assert lines[-1].startswith(said) if resume else lines[-1] == said, lines
    assert not [line for line in lines if TRACEBACK in line or "terminate called" in line
                or "Exception ignored" in line], lines
    assert sum(line.startswith("tessera:") for line in lines) == 1, lines
    assert seconds < PROMPT_S, (seconds, lines)
