"""The lock files an index keeps and those it removes (docs/indices.md): the index's own ``.lock`` stays, empty, as
the one file every writer flocks (removing it would let two writers hold "the" lock at once); a shard writer killed
outright before it made its temporary folder leaves only ``shards/.tmp-*.lock``, which the next write removes.
The killed writer is a real forked process holding a real flock, sent SIGKILL; the index is real."""

from __future__ import annotations

import os
import signal
import time

import pyarrow as pa

from operators.stale_writes import WriterLock
from operators.store import Index
from tests.killed_writers import forked_writer


def chunks(*ids: str) -> pa.Table:
    return pa.table({"docno": list(ids), "doc_id": list(ids), "text": [f"honey bees {i}" for i in ids]})


def test_a_killed_writers_lone_lock_file_goes_at_the_next_write_and_the_index_lock_stays(tmp_path):
    index = Index.create(tmp_path / "idx", {"dense": False})
    index.add(chunks("d1"))
    shards = index.path / "shards"

    def write(ready) -> None:  # killed after taking its lock, before making its folder
        WriterLock(shards / ".tmp-add-killed-0123456789ab")
        ready()
        time.sleep(60)

    pid = forked_writer(write)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert [p.name for p in shards.iterdir() if p.name.startswith(".")] == [".tmp-add-killed-0123456789ab.lock"]
    index.add(chunks("d2"))
    assert [p.name for p in shards.iterdir() if p.name.startswith(".")] == []
    assert sorted(p.name for p in index.path.iterdir()) == [".lock", "manifest.json", "shards"]
    assert (index.path / ".lock").stat().st_size == 0


def test_a_writer_waiting_for_a_live_holder_of_the_lock_says_whom_it_waits_for_and_a_killed_ones_never_blocks(
        tmp_path, caplog, monkeypatch):
    """A live holder of the index's ``.lock`` (a real child process in ``file_lock``) made every other writer wait
    without a word: an ingest's progress stopped at its commit, nothing said why. Now the wait is said once,
    naming the holder's pid, and the writer goes on once the holder is done. A holder killed outright leaves the
    file but no lock: the next writer takes it at once, saying nothing."""
    from operators.store import lock_wait
    from operators.store.layout import file_lock

    index = Index.create(tmp_path / "idx", {"dense": False})
    index.add(chunks("d1"))
    monkeypatch.setattr(lock_wait, "NOTICE_S", 0.2)

    def hold(seconds: float):
        def write(ready) -> None:
            with file_lock(index.path):
                ready()
                time.sleep(seconds)
        return write

    pid = forked_writer(hold(2.0))
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="tessera.store"):
        index.add(chunks("d2"))  # waits for the holder, then commits
    waited = time.monotonic() - started
    os.waitpid(pid, 0)
    said = [r.getMessage() for r in caplog.records if r.name == "tessera.store"]
    assert len(said) == 1 and f"pid {pid} (" in said[0] and str(index.path) in said[0], said
    assert waited > 1.0
    assert Index.open(index.path).live_doc_ids() == {"d1", "d2"}

    caplog.clear()
    pid = forked_writer(hold(60))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="tessera.store"):
        index.add(chunks("d3"))
    assert time.monotonic() - started < 5 and not caplog.records
    assert Index.open(index.path).live_doc_ids() == {"d1", "d2", "d3"}
