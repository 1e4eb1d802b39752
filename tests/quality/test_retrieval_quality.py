"""Retrieval quality on real data, measured the way a user measures it: ``tessera bench``.

The benchmarker ingests each dataset's corpus into an index (``flows.ingest``: one
chunk per document, BM25 over title + text with the English Snowball stemmer and
English stopwords, MiniLM vectors of ``title + ". " + text``), runs the built-in
``bm25``, ``dense`` and ``hybrid`` flows and writes ``metrics.json``.

SciFact (BEIR, 5,183 abstracts, 300 test queries), nDCG@10. On the full corpus the pipeline measures
bm25 0.6863 / dense 0.6484 / hybrid 0.7163 and the issue's targets are 0.680 / 0.640 / 0.710
(bm25s with English stemming and stopwords; MTEB gives MiniLM 0.645). Embedding the 5,183 abstracts
took 3 minutes on 2 idle cores and 6-8 on shared ones, so ``test_scifact_ndcg_at_10`` (``make test-quality`` and
``make test-all``; the module is marked slow, which ``make test`` leaves out) checks:

- **bm25 on the full corpus**, target 0.680, as before: a BM25-only index needs no vectors (seconds);
- **dense and hybrid on a fixed pooled subset** (``scifact_subset.json``: all 300 test queries, 930
  documents: each query's judged documents plus the top 2 of each of the bm25, dense and hybrid runs
  over the full corpus; ``derive_scifact_subset.py`` says how it is derived). The real pipeline
  measures there bm25 0.7103 / dense 0.6809 / hybrid 0.7389; the thresholds keep the full-corpus
  targets' distance below the measured figures (0.0084 for dense, 0.0063 for hybrid, rounded down):
  dense >= 0.672, hybrid >= 0.732;
- **the dense ranking itself**: a cosine does not depend on the other documents, so the subset's dense
  top 10 of each query must be the full-corpus dense ranking restricted to the subset
  (``dense_top10``), in order, for at least 95% of the queries (100% measured; float noise from
  another batch size changed none). A pooled subset alone hides dense regressions (the pool holds the
  reference's hard negatives, not the regressed model's): vectors without the title cost 0.008 dense
  nDCG@10 on the full corpus (hybrid 0.012) but nothing on the subset, and vectors cut at 128 tokens
  cost 0.026 there, 0.005 on the subset; both change the dense top 10 of every query.

Ten deliberate regressions were measured on both (BM25 without stemming, without stopwords, without titles,
k1 0.5; vectors without titles, cut at 128 tokens; CombSUM of raw scores instead of RRF, RRF k 1 or 1000,
RRF over the top 10 only): the checks above fail for exactly the six that fail the full-corpus targets.

``TESSERA_QUALITY_FULL=1`` (``make test-quality``) also runs the original full-corpus check of all three
flows against the targets (``test_scifact_ndcg_at_10_full_corpus``: 3 minutes on 2 idle cores, 6-8 when they are
shared; the subset test takes 45 s).

HotpotQA (dev subset, 685 questions with 2 gold paragraphs each): both-gold recall@10
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

FLOWS = ("bm25", "dense", "hybrid")
#: nDCG@10 on the full SciFact corpus: the issue's targets (measured: 0.6863 / 0.6484 / 0.7163).
SCIFACT_TARGETS = {"bm25": 0.680, "dense": 0.640, "hybrid": 0.710}
#: nDCG@10 on the subset of scifact_subset.json (measured: bm25 0.7103 / dense 0.6809 / hybrid 0.7389);
#: bm25 is held to its full-corpus target instead, on the full corpus.
SUBSET_THRESHOLDS = {"dense": 0.672, "hybrid": 0.732}
#: Share of queries whose subset dense top 10 is the full-corpus ranking restricted to the subset (1.0 measured).
DENSE_ORDER_KEPT = 0.95
FULL = os.environ.get("TESSERA_QUALITY_FULL", "") not in ("", "0")


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


def ranked(out: Path, flow: str) -> dict[str, list[str]]:
    """{qid: docnos by rank} of a flow's run in a bench output folder."""
    import pyarrow.parquet as pq

    run = pq.read_table(json.loads((out / "bench.json").read_text())["flows"][flow]["run_file"])
    found: dict[str, list[str]] = {}
    for qid, docno in zip(*(run.sort_by([("qid", "ascending"), ("rank", "ascending")]).column(c).to_pylist()
                            for c in ("qid", "docno"))):
        found.setdefault(qid, []).append(docno)
    return found


def test_scifact_ndcg_at_10(shared_data, scifact_subset, index_root, tmp_path):
    full = bench(shared_data / "scifact", tmp_path / "full", index_root, "10,100", flows=("bm25",))
    bm25 = full["bm25"]["nDCG@10"]
    print(f"\nSciFact nDCG@10, full corpus (300 test queries): bm25 {bm25:.4f}")
    assert bm25 >= SCIFACT_TARGETS["bm25"], f"bm25: nDCG@10 {bm25:.4f} < target {SCIFACT_TARGETS['bm25']}"

    metrics = bench(scifact_subset, tmp_path / "subset", index_root, "10,100")
    figures = {flow: metrics[flow]["nDCG@10"] for flow in FLOWS}
    print("SciFact nDCG@10, subset (300 queries, 930 documents):", {k: round(v, 4) for k, v in figures.items()})
    for flow, threshold in SUBSET_THRESHOLDS.items():
        assert figures[flow] >= threshold, f"{flow}: nDCG@10 {figures[flow]:.4f} on the subset < {threshold}"
    assert (tmp_path / "subset" / "report.md").is_file()

    reference = json.loads((Path(__file__).parent / "scifact_subset.json").read_text())["dense_top10"]
    dense = ranked(tmp_path / "subset", "dense")
    differ = [qid for qid, top in reference.items() if dense.get(qid, [])[:len(top)] != top]
    kept = 1 - len(differ) / len(reference)
    print(f"dense top 10 as on the full corpus for {kept:.1%} of the queries")
    assert kept >= DENSE_ORDER_KEPT, (
        f"the dense top 10 differs from the full-corpus ranking for {len(differ)} of {len(reference)} queries "
        f"(e.g. {differ[:5]}): the vectors changed. If that is intended, check the full corpus (make test-quality) "
        "and derive the subset again (tests/quality/derive_scifact_subset.py)")


@pytest.mark.skipif(not FULL, reason="the full-corpus SciFact check embeds 5,183 abstracts (3-8 minutes): "
                                     "set TESSERA_QUALITY_FULL=1 (make test-quality)")
def test_scifact_ndcg_at_10_full_corpus(shared_data, index_root, tmp_path):
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
