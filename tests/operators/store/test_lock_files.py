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
