"""Processes opening one new step cache at once: each waits for the others, none calls the cache broken."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

import flows.cache_database
from flows.cache import CacheError, StepCache
from flows.cache_folder import MARKER

OPENERS = """
import os, sys
from flows.cache import StepCache
root, count = sys.argv[1], int(sys.argv[2])
children = []
for _ in range(count):
    pid = os.fork()
    if pid == 0:
        try:
            StepCache(root).check()
        except Exception as err:
            print(err, flush=True)
            os._exit(1)
        os._exit(0)
    children.append(pid)
print(sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0 for pid in children), "failed")
"""


@pytest.mark.process
def test_many_processes_open_a_new_cache_at_once(tmp_path):
    """Twelve processes opening a new cache together: one in five such starts had one fail with "index.sqlite is not
    a step cache database (database is locked)" (switching to WAL does not wait for the others) or "its marker cannot
    be read" (read while another process wrote it)."""
    for attempt in range(6):
        root = tmp_path / f"cache{attempt}"
        done = subprocess.run([sys.executable, "-c", OPENERS, str(root), "12"], capture_output=True, text=True,
                              timeout=300)
        assert done.stdout.endswith("0 failed\n"), done.stdout + done.stderr
        assert StepCache(root).summary()["units"] == 0


def test_a_marker_being_written_is_not_someone_elses_file(tmp_path):
    """Another process's marker in flight (its temporary sibling) made a new cache folder "hold other files"."""
    root = tmp_path / "cache"
    root.mkdir()
    (root / f".{MARKER}.4242.0123abcd.tmp").write_text("{")
    StepCache(root).check()
    assert (root / MARKER).is_file()


def test_a_lock_held_too_long_is_not_called_a_broken_database(tmp_path, monkeypatch):
    """A database another process keeps locked was reported as "not a step cache database: move it away"."""
    root = tmp_path / "cache"
    root.mkdir()
    holder = sqlite3.connect(root / "index.sqlite", isolation_level=None)  # another process creating the cache
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(flows.cache_database, "WAIT_FOR_LOCK_S", 0.2)
    try:
        with pytest.raises(CacheError) as refused:
            StepCache(root).check()
    finally:
        holder.close()
    assert "could not be opened (database is locked)" in str(refused.value)
    assert "not a step cache database" not in str(refused.value)
    StepCache(root).check()
