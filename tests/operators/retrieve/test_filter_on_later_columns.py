"""A metadata filter on a column that only a later ``tessera index add`` brought in: the index's merged columns
count, not the first shard's alone (pre and post filtering; BM25 only, no model, no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def tessera(monkeypatch, capsys, tmp_path):
    """``tessera <args>`` in this process with ``$TESSERA_HOME`` in ``tmp_path``: (exit status, stdout, stderr)."""
    from flows.commands import main

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
        capsys.readouterr()
        status = main(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    return run


def _jsonl(path: Path, *records: dict) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _spec(path: Path, flt: dict, mode: str) -> str:
    steps = {"b": {"op": "retrieve.bm25", "params": {"k": 5, "filter": flt, "filter_mode": mode}}}
    path.write_text(json.dumps({"steps": steps}))
    return str(path)


@pytest.fixture
def two_uploads(tessera, tmp_path) -> str:
    """Index ``filt``: d1 (no ``year``) added first, then d2 and d3 with a ``year`` column."""
    first = _jsonl(tmp_path / "a.jsonl", {"_id": "d1", "text": "leave policy old"})
    later = _jsonl(tmp_path / "b.jsonl", {"_id": "d2", "text": "leave policy new", "year": 2024},
                   {"_id": "d3", "text": "leave rules", "year": 2023})
    assert tessera("index", "add", "filt", first, "--no-dense")[0] == 0
    assert tessera("index", "add", "filt", later)[0] == 0
    return "filt"


def _docnos(tessera, tmp_path, spec: str, query: str) -> list[str]:
    out = tmp_path / "run.jsonl"
    status, _, err = tessera("run", spec, "--index", "filt", "-q", query, "--no-cache", "--quiet", "--out", str(out))
    assert status == 0, err
    return [json.loads(line)["docno"] for line in out.read_text().splitlines()]


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_filter_on_a_column_only_a_later_upload_added(two_uploads, tessera, tmp_path, mode):
    spec = _spec(tmp_path / "spec.json", {"field": "year", "eq": 2024}, mode)
    assert _docnos(tessera, tmp_path, spec, "leave") == ["d2"]
    ranged = _spec(tmp_path / "ranged.json", {"field": "year", "gte": 2023}, mode)
    assert sorted(_docnos(tessera, tmp_path, ranged, "leave")) == ["d2", "d3"]


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_hits_only_from_shards_without_the_column_match_nothing(two_uploads, tessera, tmp_path, mode):
    spec = _spec(tmp_path / "spec.json", {"field": "year", "eq": 2024}, mode)
    assert _docnos(tessera, tmp_path, spec, "old") == []  # only d1 (no year) has "old"


def test_a_column_no_shard_has_is_still_refused(two_uploads, tessera, tmp_path):
    spec = _spec(tmp_path / "spec.json", {"field": "nope", "eq": 1}, "pre")
    status, _, err = tessera("run", spec, "--index", "filt", "-q", "leave", "--no-cache", "--quiet")
    assert status != 0 and "params.filter" in err and "['nope'] not found" in err and "year" in err
