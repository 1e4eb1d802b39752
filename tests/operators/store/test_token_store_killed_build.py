"""A token store build killed outright (SIGKILL) leaves its ``colbert/.tmp-*`` folder: the next build in that folder
removes it (its writer's lock is free); a live build's folder stays. The builds are real processes (forked, in
``write_token_store``), the killed one SIGKILLed while it streams its tokens."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

from operators.store.token_store import write_token_store
from tests.killed_writers import forked_writer


def building(folder: Path) -> int:
    """A child process in ``write_token_store(folder)``, one document written, waiting to be killed."""
    def items(ready):
        yield "d1", np.ones((3, 4), np.float16)
        ready()
        time.sleep(60)

    return forked_writer(lambda ready: write_token_store(folder, items(ready), dim=4))


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_killed_builds_folder_goes_at_the_next_build_and_a_live_ones_stays(tmp_path):
    stores = tmp_path / "idx" / "colbert"
    pid = building(stores / "k1")
    try:
        write_token_store(stores / "k2", [("d1", np.ones((2, 4), np.float16))], dim=4)
        assert len(hidden(stores)) == 2  # the live build's folder and its lock file
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert len(hidden(stores)) == 2  # what the killed build left
    store = write_token_store(stores / "k3", [("d2", np.ones((1, 4), np.float16))], dim=4)
    assert hidden(stores) == [] and sorted(p.name for p in stores.iterdir()) == ["k2", "k3"]
    assert store.get(["d2"])[0].shape == (1, 4)
