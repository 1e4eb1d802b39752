"""benchmarks/ingest_scale.py on a tiny corpus, BM25 only (no model): ``--count`` limits a ``--corpus``. The script's
``main`` runs in this process (its arguments, output and exit status as the script's; the ingestion runs in the child
process it starts, as from the command line), without a process's imports of its own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "ingest_scale.py"
SPEC = """name: ingest_bm25_test
description: BM25 only, no encoder
steps:
  read: {op: sources.jsonl, params: {path: corpus.jsonl}}
index_settings: {dense: false, bm25: true}
"""


@pytest.fixture
def scale(monkeypatch, capsys):
    """``scale(tmp_path, *args)``: ``ingest_scale.py --work ... --spec bm25.yaml ... ARGS`` from the repository, its
    exit status and output as ``subprocess.run`` gives them."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # the script imports its helpers as a script does
    monkeypatch.chdir(ROOT)
    from ingest_scale import main

    def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
        spec = tmp_path / "bm25.yaml"
        spec.write_text(SPEC, encoding="utf-8")
        argv = ["--work", str(tmp_path / "work"), "--spec", str(spec), "--executor", "local", "--shard-size", "4",
                *args]
        capsys.readouterr()
        try:
            status = main(argv)
        except SystemExit as exit_:  # argparse's error: its usage and message on stderr, status 2
            status = exit_.code
        out = capsys.readouterr()
        return subprocess.CompletedProcess([str(SCRIPT), *argv], status, out.out, out.err)

    return run


@pytest.mark.process
def test_count_limits_the_documents_read_from_corpus(tmp_path, scale):
    """``--count 7 --corpus FILE`` ingested the whole file (30 documents) and reported 7."""
    corpus = tmp_path / "corpus.jsonl"
    lines = (ROOT / "data" / "sample" / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:30]
    corpus.write_text("".join(lines[:10]) + "\n" + "".join(lines[10:]), encoding="utf-8")  # a blank line is no document
    done = scale(tmp_path, "--count", "11", "--corpus", str(corpus))
    assert done.returncode == 0, done.stderr
    assert "index: {'documents': 11, 'documents_indexed': 11, 'lost': 0" in done.stdout
    assert "\n11 documents in " in done.stdout
    index = tmp_path / "work" / "index"
    doc_ids = {d for shard in (index / "shards").iterdir()
               for d in pq.read_table(shard / "docs.parquet", columns=["doc_id"]).column("doc_id").to_pylist()}
    assert doc_ids == {json.loads(line)["_id"] for line in lines[:11]}


def test_count_beyond_the_corpus_is_refused(tmp_path, scale):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join((ROOT / "data" / "sample" / "corpus.jsonl").read_text(encoding="utf-8")
                              .splitlines(keepends=True)[:5]), encoding="utf-8")
    done = scale(tmp_path, "--count", "6", "--corpus", str(corpus))
    assert done.returncode == 2 and f"error: --count 6: --corpus {corpus} holds only 5 documents" in done.stderr
    assert not (tmp_path / "work" / "index").exists()
