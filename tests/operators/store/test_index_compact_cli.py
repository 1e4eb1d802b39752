"""``tessera index compact``: an index that gained a shard per add (as a service index does per upload) is rewritten
into one shard of its live chunks, deleted chunks dropped, its searches unchanged."""

from __future__ import annotations

import json

import pytest

from flows.commands import main
from operators.store import Index


def test_compact_rewrites_the_live_chunks_into_fewer_shards(tmp_path, sample_docs, capsys):
    idx = str(tmp_path / "idx")
    for n, start in enumerate(range(0, 30, 10)):  # three adds: three shards
        batch = tmp_path / f"batch{n}.jsonl"
        batch.write_text("".join(json.dumps(d) + "\n" for d in sample_docs[start:start + 10]), encoding="utf-8")
        assert main(["index", "add", idx, str(batch), "--no-dense"]) == 0
    gone = sample_docs[4]["_id"]
    assert main(["index", "delete", idx, "--doc-id", gone]) == 0
    query = sample_docs[12]["title"]
    before = Index.open(idx).search_bm25([query], k=5)[0]
    capsys.readouterr()

    assert main(["index", "compact", idx]) == 0
    out = capsys.readouterr().out
    assert "3 shard(s) with 30 chunk(s), 1 deleted, into 1 shard(s) with 29 chunk(s)" in out
    index = Index.open(idx)
    assert index.counts() == {"shards": 1, "chunks": 29, "tombstones": 0, "live_chunks": 29}
    assert not index.check()  # the new shard's files match the manifest
    after = index.search_bm25([query], k=5)[0]
    assert after.docnos == before.docnos
    assert gone not in index.search_bm25([sample_docs[4]["title"]], k=30)[0].docnos

    assert main(["index", "compact", idx, "--max-chunks", "10", "--json"]) == 0  # at most 10 chunks a shard
    done = json.loads(capsys.readouterr().out)
    index = Index.open(idx)
    assert index.counts()["shards"] == 3
    assert {k: done[k] for k in ("shards_before", "shards_after", "chunks", "chunks_before", "tombstones_dropped",
                                 "generation")} == {"shards_before": 1, "shards_after": 3, "chunks": 29,
                                                    "chunks_before": 29, "tombstones_dropped": 0,
                                                    "generation": index.manifest.generation}
    assert done["shards"] == [s.id for s in index.manifest.shards]
    assert done["before"] == {"shards": 1, "chunks": 29, "tombstones": 0, "live_chunks": 29}

    # one compacted shard, nothing deleted: each compaction rewrote it whole and kept the old copy for an hour
    assert main(["index", "compact", idx]) == 0
    generation, shards = Index.open(idx).manifest.generation, sorted((tmp_path / "idx" / "shards").iterdir())
    capsys.readouterr()
    assert main(["index", "compact", idx]) == 0
    assert capsys.readouterr().out.startswith(f"nothing to compact: {idx} is 1 compacted shard(s) with 29 chunk(s)")
    assert Index.open(idx).manifest.generation == generation
    assert sorted((tmp_path / "idx" / "shards").iterdir()) == shards
    assert main(["index", "compact", idx, "--max-chunks", "20", "--json"]) == 0  # smaller shards asked: it splits
    assert json.loads(capsys.readouterr().out)["changed"] is True and Index.open(idx).counts()["shards"] == 2


def _compact_on_a_terminal(idx: str, home, *args: str) -> tuple[int, str, str]:
    """``tessera index compact`` in its own process, its stderr a terminal (a pty): (status, stdout, what the
    terminal showed)."""
    import os
    import pty
    import subprocess
    import sys
    from pathlib import Path

    terminal, its_end = pty.openpty()
    tessera = Path(sys.executable).with_name("tessera")
    proc = subprocess.Popen([str(tessera), "index", "compact", idx, *args], stdout=subprocess.PIPE, stderr=its_end,
                            env={"PATH": "/usr/bin:/bin", "TESSERA_HOME": str(home), "HF_HUB_OFFLINE": "1",
                                 "COLUMNS": "120", "TERM": "xterm"})
    os.close(its_end)
    shown = b""
    while True:
        try:
            data = os.read(terminal, 4096)
        except OSError:  # the process closed its end
            break
        if not data:
            break
        shown += data
    os.close(terminal)
    out = proc.stdout.read().decode()
    return proc.wait(timeout=120), out, shown.decode(errors="replace")


@pytest.mark.process
def test_compact_shows_the_shards_merged_on_a_terminal_and_nothing_with_json(tmp_path, sample_docs):
    idx = str(tmp_path / "idx")
    for n in range(3):
        batch = tmp_path / f"batch{n}.jsonl"
        batch.write_text("".join(json.dumps(d) + "\n" for d in sample_docs[n * 10:(n + 1) * 10]), encoding="utf-8")
        assert main(["index", "add", idx, str(batch), "--no-dense"]) == 0
    status, out, shown = _compact_on_a_terminal(idx, tmp_path / "home")
    assert status == 0 and "into 1 shard(s) with 30 chunk(s)" in out
    assert "compact" in shown and "3/3" in shown and "shards  30 chunks" in shown  # the bar, at its end

    status, out, shown = _compact_on_a_terminal(idx, tmp_path / "home", "--max-chunks", "10", "--json")
    assert status == 0 and shown == ""  # no bar with --json, even on a terminal
    done = json.loads(out)  # stdout is the one JSON document, as before
    assert set(done) == {"index", "shards_before", "shards_after", "chunks", "chunks_before", "tombstones_dropped",
                         "generation", "seconds", "changed", "shards", "before"}
    assert (done["shards_before"], done["shards_after"], done["chunks"]) == (1, 3, 30)
