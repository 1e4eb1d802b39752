"""``tessera cache info``: what the step cache holds (its size, stored outputs and steps, when it was used), the
figures a prune decides on; before, only a prune or a clear said any of it, by changing the cache. On a real cache
filled by real runs of the bm25 flow; the command runs in this process (``flows.commands.main``)."""

from __future__ import annotations

import json
import os

from flows.cache import StepCache
from flows.commands import main
from operators.byte_sizes import format_bytes


def info(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["cache", "info", *args])
    return status, capsys.readouterr().out


def test_info_says_what_the_cache_holds_and_a_prune_then_agrees(bm25_index, tmp_path, monkeypatch, capsys):
    from flows.api import Flow

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    root = tmp_path / "cache"
    status, out = info(capsys, "--cache-dir", str(root))
    assert status == 0 and out == f"no step cache at {root} (a run with the cache on makes it)\n"

    flow = Flow.load("bm25", index=bm25_index)
    for query in ("gothic cathedrals", "classical music", "folk dance"):
        flow.run(query, cache=root)
    status, out = info(capsys, "--cache-dir", str(root), "--json")
    held = json.loads(out)
    size = sum(entry.stat().st_size for entry in os.scandir(root / "data"))
    assert status == 0 and held["exists"] and (held["files"], held["units"], held["bytes"]) == (3, 3, size)
    assert (held["steps"], held["flows"], held["calls"]) == (1, 1, 0)
    assert held["least_recent_use"] <= held["last_use"]
    assert held["operators"] == {"retrieve.bm25": 3}  # what clear --operator would remove
    status, out = info(capsys, "--cache-dir", str(root))
    assert out.startswith(f"step cache {root}: {format_bytes(size)} in 3 file(s), 3 stored unit(s) of 1 step(s) of "
                          "1 flow(s); last used "), out
    assert out.endswith("\nunits by operator: retrieve.bm25 3 (tessera cache clear --operator NAME clears one)\n"
                        "bound it with tessera cache prune --max-size SIZE or --older-than DAYS\n")

    StepCache(root).prune(max_bytes=0)  # what info counted is what a prune removes
    assert json.loads(info(capsys, "--cache-dir", str(root), "--json")[1]) == {  # the path's ë as the command wrote it
        "cache_dir": str(root), "exists": True, "files": 0, "bytes": 0, "units": 0, "calls": 0, "steps": 1,
        "flows": 1, "least_recent_use": None, "last_use": None, "operators": {}}


def test_a_folder_that_is_no_cache_is_refused_and_left_alone(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    status = main(["cache", "info", "--cache-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and f"field '--cache-dir': {tmp_path} is not a Tessera step cache" in err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_file_where_the_data_folder_goes_is_named_not_an_internal_error(tmp_path, capsys):
    """``info`` stopped with an internal NotADirectoryError, a run and a prune said only 'File exists'."""
    cache = tmp_path / "cache"
    StepCache(cache).summary()  # nothing there yet
    main(["cache", "prune", "--max-size", "1G", "--cache-dir", str(cache)])  # makes nothing either
    StepCache(cache)._conn()  # a cache made as a run makes it
    (cache / "data").rmdir()
    (cache / "data").write_text("mine")
    status, out = info(capsys, "--cache-dir", str(cache))
    assert status == 0 and "0 B in 0 file(s)" in out
    capsys.readouterr()
    assert main(["cache", "prune", "--max-size", "1G", "--cache-dir", str(cache)]) == 2
    assert f"field '--cache-dir': cache directory {cache}: {cache / 'data'} is a file, not a folder" in \
        capsys.readouterr().err
    assert (cache / "data").read_text() == "mine"
