"""The scale corpus builder (benchmarks/build_scale_corpus.py): deterministic, distinct ids, real-looking texts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.build_scale_corpus import build, length_table, main

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "build_scale_corpus.py"


@pytest.mark.data
def test_same_seed_same_file_and_a_smaller_count_is_a_prefix(shared_data, tmp_path, capsys):
    first = build(tmp_path / "a", 2000, seed=7, data=shared_data, progress=False)
    second = build(tmp_path / "b", 2000, seed=7, data=shared_data, progress=False)
    assert first["sha256"] == second["sha256"]
    assert (tmp_path / "a" / "corpus.jsonl").read_bytes() == (tmp_path / "b" / "corpus.jsonl").read_bytes()
    lines = (tmp_path / "a" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines]
    assert len(docs) == 2000
    assert len({d["_id"] for d in docs}) == 2000
    texts = [d["text"] for d in docs]
    assert all(t.strip() for t in texts)
    assert len(set(texts)) >= 0.99 * len(texts)
    # the output follows the real passages' lengths (a 2,000 sample: the medians within 15 %)
    assert abs(np.median(first["output_lengths"]) / np.median(first["source_passage_lengths"]) - 1) < 0.15
    assert "output" in length_table(first)

    main(["--count", "500", "--seed", "7", "--out", str(tmp_path / "c"), "--data", str(shared_data), "--quiet"])
    assert (tmp_path / "c" / "corpus.jsonl").read_text(encoding="utf-8").splitlines() == lines[:500]
    assert "sha256" in capsys.readouterr().out

    other = build(tmp_path / "d", 500, seed=8, data=shared_data, progress=False)
    assert other["sha256"] != first["sha256"]


@pytest.mark.parametrize("unbuffered", [True, False])
@pytest.mark.process
def test_a_reader_that_stops_early_ends_it_quietly(tmp_path, unbuffered):
    """``build_scale_corpus.py | head -1`` wrote the corpus, then ended with a BrokenPipeError traceback (status 1)
    as it printed its summary; buffered, the error came at exit. Now: status 0, nothing on stderr."""
    data = tmp_path / "data" / "mini"
    data.mkdir(parents=True)
    (data / "corpus.jsonl").write_text("".join(json.dumps(
        {"_id": f"d{i}", "title": f"t{i}", "text": f"Bees make honey in hive {i}. Flowers need bees."}) + "\n"
        for i in range(20)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | ({"PYTHONUNBUFFERED": "1"} if unbuffered
                                                                            else {})
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--count", "30", "--data", str(tmp_path / "data"),
                             "--out", str(tmp_path / "out"), "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # the reader is gone before the summary is printed
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == ""
    assert len((tmp_path / "out" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()) == 30
