"""``tessera run --json`` and ``--out FILE.jsonl`` over many results: the rows are encoded a batch at a time, not
held all at once as Python objects beside the whole document as one string (3,000 SciFact queries took 3.4 GB for
456 MB of JSON). Python's own allocations are traced (``tracemalloc``) while the command's printer and writer
handle a real result of 2,000 rows of 20 KB each: BM25 over a small corpus (``retrieve.corpus_bm25``: no model)."""

from __future__ import annotations

import argparse
import json
import sys
import tracemalloc

import pytest


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    from flows.api import Flow
    from flows.queries import read_queries

    folder = tmp_path_factory.mktemp("json_memory")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"honey bees {i} " + "pollen " * 3000}) + "\n"
                              for i in range(40)))
    spec = folder / "big.yaml"
    spec.write_text(f"name: big\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {corpus}, k: 40}}}}\n")
    queries = folder / "q.txt"
    queries.write_text("".join(f"honey bees {i}\n" for i in range(50)))
    queries = read_queries(queries)
    return Flow.load(str(spec)).run(queries), queries


def traced_peak(call) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_json_rows_are_printed_a_batch_at_a_time(result, tmp_path, monkeypatch):
    from flows.commands.run import _print

    flow_result, queries = result
    args = argparse.Namespace(json=True, top=None, quiet=True, out=None)
    with open(tmp_path / "stdout.json", "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        peak = traced_peak(lambda: _print(args, flow_result, queries, None))
    text = (tmp_path / "stdout.json").read_text()
    assert len(json.loads(text)["rows"]) == 2000
    assert peak < len(text) / 4, (peak, len(text))  # was above len(text): the rows, then the document


def test_jsonl_out_is_written_a_batch_at_a_time(result, tmp_path):
    from flows.queries import write_results

    out = tmp_path / "rows.jsonl"
    peak = traced_peak(lambda: write_results(result[0].table, out))
    lines = out.read_text().splitlines()
    assert len(lines) == 2000 and json.loads(lines[-1])["qid"]
    assert peak < out.stat().st_size / 4, (peak, out.stat().st_size)
