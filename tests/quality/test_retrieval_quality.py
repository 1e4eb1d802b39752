"""Retrieval quality on real data, measured the way a user measures it: ``tessera bench``.

The benchmarker ingests each dataset's corpus into an index (``flows.ingest``: one
chunk per document, BM25 over title + text with the English Snowball stemmer and
English stopwords, MiniLM vectors of ``title + ". " + text``), runs the built-in
``bm25``, ``dense`` and ``hybrid`` flows and writes ``metrics.json``.

SciFact (BEIR, 5,183 abstracts, 300 test queries), nDCG@10; the targets are the
issue's: BM25 >= 0.680 (bm25s with English stemming and stopwords reaches 0.686),
all-MiniLM-L6-v2 dense >= 0.640 (MTEB: 0.645), RRF hybrid >= 0.710. HotpotQA (dev
subset, 685 questions with 2 gold paragraphs each): both-gold recall@10
(``PerfectRecall@10``) of BM25 is held above 0.8 (0.832 measured).
Set ``TESSERA_QUALITY_CACHE`` to a folder to keep the built indices between sessions
(they are keyed by corpus checksum and index settings).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.data, pytest.mark.slow]

SCIFACT_TARGETS = {"bm25": 0.680, "dense": 0.640, "hybrid": 0.710}
FLOWS = ("bm25", "dense", "hybrid")


@pytest.fixture(scope="session")
def index_root(tmp_path_factory) -> Path:
    cached = os.environ.get("TESSERA_QUALITY_CACHE")
    if cached:
        Path(cached).mkdir(parents=True, exist_ok=True)
        return Path(cached)
    return tmp_path_factory.mktemp("quality-indices")


def bench(dataset: Path, out: Path, index_root: Path, k: str, flows=FLOWS) -> dict[str, dict[str, float]]:
    from flows.commands import main

    args = ["bench", "--dataset", str(dataset), "--out", str(out), "--index-dir", str(index_root),
            "--k", k, "--no-mlflow", "--quiet"]
    for flow in flows:
        args += ["--flow", flow]
    assert main(args) == 0
    return json.loads((out / "metrics.json").read_text())


def test_scifact_ndcg_at_10(shared_data, index_root, tmp_path):
    metrics = bench(shared_data / "scifact", tmp_path / "scifact", index_root, "10,100")
    figures = {flow: metrics[flow]["nDCG@10"] for flow in FLOWS}
    print("\nSciFact nDCG@10 (300 test queries):", {k: round(v, 4) for k, v in figures.items()})
    for flow, target in SCIFACT_TARGETS.items():
        assert figures[flow] >= target, f"{flow}: nDCG@10 {figures[flow]:.4f} < target {target}"
    assert (tmp_path / "scifact" / "report.md").is_file()


def test_hotpotqa_both_gold_recall_at_10(shared_data, index_root, tmp_path):
    # BM25 only: the check is a floor that catches a broken multi-document pipeline, and embedding
    # HotpotQA's 6,640 passages for dense and hybrid (already held to targets on SciFact above) would cost
    # the suite minutes on 2 cores; the dense and hybrid figures come from `tessera bench` (README).
    metrics = bench(shared_data / "hotpotqa_dev_subset", tmp_path / "hotpotqa", index_root, "2,10,100",
                    flows=("bm25",))
    value = metrics["bm25"]["PerfectRecall@10"]
    print(f"\nHotpotQA dev subset both-gold recall@10 (685 questions): bm25 {value:.4f}")
    assert value >= 0.8, f"bm25: both-gold recall@10 {value:.3f} < 0.8 (0.832 when measured; a broken pipeline?)"
