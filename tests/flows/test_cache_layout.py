"""A step cache that a later Tessera wrote (its marker names another layout) is refused in one line naming the
folder and the layout, and nothing of it is read, written or deleted: this release would misread its entries,
or store ones the later release misreads. A cache of this layout, or one from before markers, is used as ever."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from flows.cache import CacheError, StepCache
from flows.cache_folder import LAYOUT, MARKER
from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from tests.flows.test_cli import assert_one_line_error, tessera  # noqa: F401 - the fixture

SPEC = {"name": "words", "steps": {"words": {"op": "analyze.word_count", "params": {"input_column": "query"}}}}
QUERIES = pa.table({"qid": ["q1", "q2"], "query": ["honey bees", "gothic cathedrals"]})


def _run(cache: StepCache):
    return LocalExecutor(cache=cache).run(FlowSpec.parse(SPEC).build(), QUERIES)


def _snapshot(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _stored_cache(root) -> StepCache:
    """A cache this release filled by a real run (entries, files, marker), closed."""
    cache = StepCache(root)
    _run(cache)
    assert _run(cache).steps["words"].hit_ratio == 1.0
    cache.close()
    return cache


def test_a_later_layout_is_refused_and_left_as_it_was(tmp_path):
    root = tmp_path / "cache"
    _stored_cache(root)
    (root / MARKER).write_text(json.dumps({"tessera": "step cache", "layout": LAYOUT + 1}) + "\n")
    before = _snapshot(root)
    with pytest.raises(CacheError) as err:
        _run(StepCache(root))
    assert str(root) in err.value.message and f"layout {LAYOUT + 1}" in err.value.message
    assert "later Tessera" in err.value.message and err.value.field == "cache_dir"
    with pytest.raises(CacheError, match="later Tessera"):
        StepCache(root).prune(max_bytes=0)  # would evict the later release's files
    with pytest.raises(CacheError, match="refusing to clear .*later Tessera.*nothing was deleted"):
        StepCache(root).clear()  # deleted them all (tessera cache clear exited 0)
    assert _snapshot(root) == before


def test_this_layout_and_a_cache_from_before_markers_are_used(tmp_path):
    root = tmp_path / "cache"
    _stored_cache(root)
    assert json.loads((root / MARKER).read_text())["layout"] == LAYOUT
    (root / MARKER).unlink()  # a cache made before markers
    assert _run(StepCache(root)).steps["words"].hit_ratio == 1.0


def test_the_command_line_says_it_in_one_line(tmp_path, tessera):  # noqa: F811 - the fixture
    home = tmp_path / "home"
    root = home / "cache"
    root.mkdir(parents=True)
    (root / MARKER).write_text(json.dumps({"tessera": "step cache", "layout": 99}))
    spec = tmp_path / "words.yaml"
    spec.write_text(json.dumps(SPEC))
    proc = tessera("run", str(spec), "-q", "honey bees", home=home, check=None)
    assert_one_line_error(proc, str(root), "layout 99", "later Tessera", "another cache folder")
    assert [p.name for p in root.iterdir()] == [MARKER]  # no database made in it


def test_reading_a_cache_of_an_earlier_release_changes_nothing_in_it(tmp_path):
    """An earlier release's cache (no ``files`` table of last uses: it came on 2026-11-30) read by tessera cache info
    and explain: its files stay as they were. Opened as a run opens it, the table was added and the database's
    -wal and -shm files were left beside it, where reading promises to change nothing (docs/compatibility.md)."""
    import sqlite3

    root = tmp_path / "cache"
    _stored_cache(root)
    with sqlite3.connect(root / "index.sqlite") as conn:
        conn.execute("DROP TABLE files")  # as the earlier release made it: units and steps, in WAL mode
    conn.close()
    before = _snapshot(root)
    held = StepCache(root).summary()
    assert (held["units"], held["steps"], held["flows"]) == (2, 1, 1) and held["files"] == 1
    [explained] = StepCache(root).explain("words")
    assert explained["step"] == "words" and explained["op"] == "analyze.word_count"
    assert _snapshot(root) == before


def test_reading_a_cache_whose_last_run_left_its_wal_file_changes_nothing_in_it(tmp_path):
    """A run whose process ended without closing its connection leaves what it stored in the -wal file; tessera cache
    info then folded it into index.sqlite and removed the -wal and -shm files (the last connection to close)."""
    import shutil

    root = tmp_path / "cache"
    writer = StepCache(root)
    _run(writer)  # its connection stays open: the -wal file holds what it stored, as a process that ended left it
    copy = tmp_path / "left"
    shutil.copytree(root, copy)
    writer.close()
    assert (copy / "index.sqlite-wal").stat().st_size > 0

    def stored() -> dict[str, bytes]:  # -shm holds no content, only SQLite's index of the -wal, which a reader rebuilds
        return {name: data for name, data in _snapshot(copy).items() if not name.endswith("-shm")}

    before = stored()
    assert StepCache(copy).summary()["units"] == 2
    assert StepCache(copy).explain("words")[0]["step"] == "words"
    assert stored() == before and (copy / "index.sqlite-shm").exists()


def test_a_cache_from_before_markers_in_a_folder_named_with_uri_characters_is_cleared(tmp_path):
    """Its database was opened as ``file:PATH?mode=ro``: SQLite read a ``?`` or ``#`` in the folder's name as the
    URI's query or fragment and ``%20`` as a space, so ``tessera cache clear`` refused the cache as no step cache, and
    made an empty database beside it (``a?b/index.sqlite`` opened ``a``, writable)."""
    for name in ("a?b", "c#d", "e%20f"):
        root = tmp_path / name / "cache"
        _stored_cache(root)
        (root / MARKER).unlink()  # a cache made before markers
        assert StepCache(root).clear() and not root.exists(), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a?b", "c#d", "e%20f"]

