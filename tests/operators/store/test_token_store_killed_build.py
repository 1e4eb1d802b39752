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


def building(folder: Path) -> int:
    """A child process in ``write_token_store(folder)``, one document written, waiting to be killed."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            def items():
                yield "d1", np.ones((3, 4), np.float16)
                os.write(ready_w, b"1")
                time.sleep(60)

            write_token_store(folder, items(), dim=4)
        finally:
            os._exit(0)
    os.close(ready_w)
    assert os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    return pid


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
