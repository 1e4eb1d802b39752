"""``tessera cache prune --older-than DAYS`` forgets the model calls an unfinished batch saved more than DAYS days ago
(``flows.cache_calls``): a batch interrupted and never rerun left them until ``cache clear``. Younger ones stay for the
rerun, ``--max-size`` alone leaves them, and stored units (with rows or without) are untouched. ``StepCache.prune``
with no cache there returns the same keys as with one. A real cache (real SQLite, a real run's units); a call saved
40 days ago is one whose recorded time is 40 days back, as the prune tests backdate files."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from flows.cache import StepCache
from flows.cache_calls import BatchCalls
from tests.flows.test_cli import tessera  # noqa: F401 - the fixture

DAY = 86400


def backdate_call(root: Path, call: bytes, calls: BatchCalls, days: float) -> None:
    key = calls._key(call)
    with sqlite3.connect(root / "index.sqlite") as conn:
        (meta,) = conn.execute("SELECT meta FROM units WHERE key = ?", (key,)).fetchone()
        record = json.loads(meta)
        record["saved"] = time.time() - days * DAY
        conn.execute("UPDATE units SET meta = ? WHERE key = ?", (json.dumps(record), key))


def test_prune_by_age_forgets_old_saved_calls_and_keeps_the_rest(tessera, tmp_path):  # noqa: F811
    from flows.api import Flow

    root, home, corpus = tmp_path / "cache", tmp_path / "home", tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": text}) + "\n" for i, text in
                              enumerate(["honey bees", "opera singers", "gothic cathedrals"])))
    flow = Flow.load({"name": "tiny", "steps": {"bm25": {"op": "retrieve.corpus_bm25",
                                                         "params": {"corpus": str(corpus), "k": 3}}}})
    flow.run(["honey bees", "zzzqqq"], cache=root)  # units with rows, and one without (no match)
    cache = StepCache(root)
    with sqlite3.connect(root / "index.sqlite") as conn:
        units_before = conn.execute("SELECT count(*) FROM units").fetchone()[0]
    calls = BatchCalls(cache, "ab" * 16)  # an interrupted batch's replies: recorded, never forgotten
    calls.record(b"old", {"text": "answered 40 days ago"})
    calls.record(b"new", {"text": "answered now"})
    backdate_call(root, b"old", calls, days=40)

    done = json.loads(tessera("cache", "prune", "--max-size", "1G", "--cache-dir", str(root), "--json",
                              home=home).stdout)
    assert done["calls"] == 0 and set(BatchCalls(cache, "ab" * 16).recall([b"old", b"new"])) == {b"old", b"new"}
    text = tessera("cache", "prune", "--older-than", "30", "--cache-dir", str(root), home=home).stdout
    assert "removed 0 file(s), 0 unit(s), 1 saved model call(s)," in text, text
    assert BatchCalls(cache, "ab" * 16).recall([b"old", b"new"]) == {b"new": {"text": "answered now"}}
    with sqlite3.connect(root / "index.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM units").fetchone()[0] == units_before + 1  # the run's, and new
    assert flow.run(["honey bees", "zzzqqq"], cache=root).cache_hit_ratio == 1.0


def test_prune_where_there_is_no_cache_returns_the_same_keys(tmp_path):
    StepCache(tmp_path / "real").put([(b"k" * 16, None, {"x": 1})])
    real = StepCache(tmp_path / "real").prune(older_than_s=DAY)
    none = StepCache(tmp_path / "none").prune(older_than_s=DAY)
    assert set(none) == set(real) and not any(none.values())
    assert not (tmp_path / "none").exists()


def test_a_recorded_call_says_when_it_was_saved(tmp_path):
    cache = StepCache(tmp_path / "cache")
    before = time.time()
    BatchCalls(cache, "cd" * 16).record(b"c", {"text": "t"})
    with sqlite3.connect(tmp_path / "cache" / "index.sqlite") as conn:
        (meta,) = conn.execute("SELECT meta FROM units").fetchone()
    assert before <= json.loads(meta)["saved"] <= time.time()
