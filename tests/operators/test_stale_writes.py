"""``operators.stale_writes``: a temporary whose writer was SIGKILLed is told from a live writer's. The writers are
real processes (forked, holding a real ``flock``), killed with SIGKILL; ages are set with ``os.utime``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from operators.stale_writes import FREE, GRACE_S, WriterLock, abandoned, lock_path
from tests.killed_writers import backdate, dead_pid, forked_writer


def writer(tmp: Path) -> int:
    """A child process that takes ``tmp``'s writer lock, fills ``tmp`` and waits (until it is killed)."""
    def write(ready) -> None:
        WriterLock(tmp)
        tmp.mkdir()
        (tmp / "part").write_bytes(b"x" * 100)
        ready()
        time.sleep(60)

    return forked_writer(write)


def test_a_live_writers_temporary_is_kept_whatever_its_age_and_a_killed_ones_is_removed(tmp_path):
    tmp = tmp_path / ".tmp-shard-1-abc"
    pid = writer(tmp)
    try:
        backdate(tmp, 2 * GRACE_S)
        assert abandoned(tmp, remove_it=True) is None and tmp.is_dir()  # its writer holds the lock
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert abandoned(tmp) == FREE and tmp.is_dir()  # asking removes nothing
    assert abandoned(tmp, remove_it=True) == FREE
    assert not tmp.exists() and not lock_path(tmp).exists()


def test_a_finished_write_leaves_no_lock_file(tmp_path):
    tmp = tmp_path / ".x.tmp-1"
    with WriterLock(tmp):
        tmp.mkdir()
        assert lock_path(tmp).exists()
        os.rename(tmp, tmp_path / "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]


def test_without_a_lock_age_and_pid_decide(tmp_path):
    partial = tmp_path / ".model.123.onnx"
    partial.write_bytes(b"\0" * 10)
    gone = dead_pid()
    assert abandoned(partial, pid=gone) is None  # changed within the grace period: maybe a live writer's
    backdate(partial, GRACE_S + 60)
    assert abandoned(partial, pid=os.getpid()) is None  # its pid runs here
    assert f"its writer (pid {gone}) is gone" in abandoned(partial, pid=gone)
    assert "unchanged since" in abandoned(partial)
    folder = tmp_path / ".old.tmp-1"
    folder.mkdir()
    (folder / "weights").write_bytes(b"w")
    backdate(folder, GRACE_S + 60)
    os.utime(folder / "weights")  # written now, deep inside: the folder is not stale
    assert abandoned(folder) is None
