"""The files this test process holds open, for the tests that a store lets go of its databases: what
``/proc/self/fd`` points at under a test's own folders (another test of the same worker, or a thread it left, holds
files of its own)."""

from __future__ import annotations

import os
from pathlib import Path


def open_files(*folders: Path) -> list[str]:
    """The paths under ``folders`` that this process holds open (a deleted one ends in `` (deleted)``)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor of the listing itself, closed since it was listed
            continue
        if any(target.startswith(f"{folder}{os.sep}") for folder in folders):
            held.append(target)
    return held
