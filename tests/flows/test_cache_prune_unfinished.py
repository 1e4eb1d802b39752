"""``tessera cache prune`` removes the ``data/<random>.tmp`` file a ``put`` killed outright left (its Arrow file
before the rename: nothing else removed it but ``clear``), once unchanged for an hour; a younger one may be a live
``put``'s and stays. A real cache filled by a real run; the leftover is a real stored file's first bytes."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from operators.stale_writes import GRACE_S
from tests.flows.test_cli import tessera  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "sample" / "corpus.jsonl"


def test_prune_removes_a_killed_puts_temporary_file_once_it_is_an_hour_old(tessera, tmp_path):  # noqa: F811
    from flows.api import Flow

    root, home = tmp_path / "cache", tmp_path / "home"
    flow = Flow.load({"name": "tiny", "steps": {"bm25": {"op": "retrieve.corpus_bm25",
                                                         "params": {"corpus": str(CORPUS), "k": 3}}}})
    flow.run("honey bees", cache=root)
    (stored,) = (root / "data").iterdir()
    old, young = (root / "data" / f"{uuid.uuid4().hex}.tmp" for _ in range(2))
    for leftover in (old, young):
        leftover.write_bytes(stored.read_bytes()[:100])
    then = time.time() - GRACE_S - 60
    os.utime(old, (then, then))
    done = json.loads(tessera("cache", "prune", "--older-than", "30", "--cache-dir", str(root), "--json",
                              home=home).stdout)
    assert (done["unfinished"], done["bytes"], done["files"], done["files_left"]) == (1, 100, 0, 1)
    assert sorted(p.name for p in (root / "data").iterdir()) == sorted([stored.name, young.name])
    os.utime(young, (then, then))  # an hour later
    text = tessera("cache", "prune", "--older-than", "30", "--cache-dir", str(root), home=home).stdout
    assert "removed 0 file(s), 0 unit(s), 1 unfinished write(s), 100 B;" in text, text
    assert sorted(p.name for p in (root / "data").iterdir()) == [stored.name]
    assert flow.run("honey bees", cache=root).cache_hit_ratio == 1
