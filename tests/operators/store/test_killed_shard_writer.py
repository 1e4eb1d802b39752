"""A shard writer killed outright (SIGKILL) leaves its ``shards/.tmp-*`` folder: the next shard write to the index
removes it (its writer's lock is free), where it stayed until a compaction an hour later; a live writer's folder is
never removed, not even by ``remove_uncommitted(older_than_s=0)``. The writer is a real process, held inside its
write (its BM25 step waits) and killed with SIGKILL; the index is real."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

WRITER = """
import sys, time
import pyarrow as pa
from operators.store import Index, shard

def stuck(*args, **kwargs):
    print("writing", flush=True)
    time.sleep(120)

shard.bm25.indexed_texts = stuck  # the write waits here, its temporary folder made and locked
Index.open(sys.argv[1]).add(pa.table({"docno": ["w1"], "doc_id": ["w1"], "text": ["a shard never finished"]}))
"""


def chunks(*ids: str):
    import pyarrow as pa

    return pa.table({"docno": list(ids), "doc_id": list(ids), "text": [f"honey bees {i}" for i in ids]})


@pytest.mark.slow  # a Python process that imports the store, killed mid-write (about 2 s)
def test_a_killed_writers_temporary_folder_goes_at_the_next_write_and_a_live_ones_stays(tmp_path):
    from operators.store import Index

    index = Index.create(tmp_path / "idx", {"dense": False})
    index.add(chunks("d1"))
    shards = index.path / "shards"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(index.path)], cwd=REPO, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        (tmp,) = [p for p in shards.iterdir() if p.name.startswith(".tmp-") and p.is_dir()]
        assert index.remove_uncommitted(older_than_s=0) == []  # a live writer's, whatever its age
        index.add(chunks("d2"))  # another write meanwhile leaves it too
        assert tmp.is_dir()
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL and tmp.is_dir()  # what a killed writer leaves
    index.add(chunks("d3"))  # the next write removes it
    assert sorted(p.name for p in shards.iterdir() if p.name.startswith(".")) == []
    assert sorted(index.columns(["docno"])[1].column("docno").to_pylist()) == ["d1", "d2", "d3"]
    assert index.uncommitted() == []
