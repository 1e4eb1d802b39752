"""retrieve.run_file: the contract on a run of the sample documents; an external run of SciFact (every score tied, as
a run with coarse scores has them) benchmarked beside Tessera's BM25 scores as ir-measures scores the file."""

from __future__ import annotations

import json

import ir_measures
import pyarrow.compute as pc
import pytest
from ir_measures import AP, RR, R, P, nDCG

from operators.errors import OperatorError
from operators.registry import create
from operators.testing import SAMPLE_QUERIES, OperatorContract, sample_documents
from operators.trec_run_files import read_trec_run
from operators.testing import sample_queries as queries


def sample_run(path):
    """Each sample query ranks five sample documents, scores falling, with one tie; ``nobody`` ranks one more."""
    docs = sample_documents(10).column("docno").to_pylist()
    lines = [f"{qid} Q0 {docs[(i + j) % 10]} {j + 1} {10 - min(j, 3)} other\n"
             for i, qid in enumerate(SAMPLE_QUERIES) for j in range(5)]
    path.write_text("".join(lines) + f"nobody Q0 {docs[9]} 1 3.5 other\n")
    return path


class TestRunFileContract(OperatorContract):
    operator_name = "retrieve.run_file"

    @pytest.fixture(autouse=True)
    def _run_file(self, tmp_path):
        self.path = sample_run(tmp_path / "other.trec")

    def make_operator(self, **params):
        return create("retrieve.run_file", {"path": str(self.path), **params}, step_id="other")

    def make_input(self, n_queries: int = 3, per_query: int = 5):
        return queries(n_queries)


def test_each_query_gets_its_rows_in_trec_evals_order_and_its_top_k(tmp_path):
    path = sample_run(tmp_path / "other.trec")
    docs = sample_documents(10).column("docno").to_pylist()
    out = create("retrieve.run_file", {"path": str(path), "k": 4}, step_id="other")(queries(2))
    first = out.filter(pc.equal(out.column("qid"), "q1"))
    tied = sorted(docs[3:5], reverse=True)  # scores 7 and 7: docno descending, as trec_eval reads them
    assert first.column("docno").to_pylist() == [docs[0], docs[1], docs[2], tied[0]]
    assert first.column("rank").to_pylist() == [1, 2, 3, 4] and out.num_rows == 8


def test_a_malformed_run_is_refused_naming_the_step_and_the_line(tmp_path):
    path = tmp_path / "bad.trec"
    path.write_text("q1 Q0 d1 1 2.5 x\nq1 Q0 d2 2\n")
    with pytest.raises(OperatorError, match=rf"step 'other'.*params.path.*{path}:2: a TREC run line is"):
        create("retrieve.run_file", {"path": str(path)}, step_id="other")(queries(1))


@pytest.mark.data
@pytest.mark.slow
def test_an_external_run_benchmarked_as_a_baseline_scores_as_ir_measures_scores_the_file(shared_data, tmp_path,
                                                                                          monkeypatch):
    """SciFact's first 10 judged queries over their judged abstracts and 200 others; the external run gives every
    document of a query the same score, so only trec_eval's tie order (docno, descending) ranks it."""
    from flows.bench import BenchOptions, benchmark

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    scifact, root = shared_data / "scifact", tmp_path / "data"
    (root / "qrels").mkdir(parents=True)
    rows = [line.split("\t") for line in (scifact / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    qids = list(dict.fromkeys(q for q, _, _ in rows))[:10]
    judged = sorted({d for q, d, _ in rows if q in qids})
    kept = []
    with open(scifact / "corpus.jsonl") as corpus, open(root / "corpus.jsonl", "w") as out:
        for n, line in enumerate(corpus):
            if n < 200 or json.loads(line)["_id"] in judged:
                out.write(line)
                kept.append(json.loads(line)["_id"])
    (root / "qrels" / "test.tsv").write_text("".join(f"{q} Q0 {d} {g}\n" for q, d, g in rows if q in qids))
    texts = {r["_id"]: r["text"] for r in map(json.loads, (scifact / "queries.jsonl").read_text().splitlines())}
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": texts[q]}) + "\n" for q in qids))
    run = tmp_path / "anserini.trec"
    listed = kept[:100] + judged  # in the file's order the judged ones come last: only the tie order finds them
    run.write_text("".join(f"{q} Q0 {d} {r + 1} 1.0 Anserini\n" for q in qids for r, d in enumerate(listed)))
    (tmp_path / "anserini.yaml").write_text(f"name: anserini\nsteps:\n  run:\n    op: retrieve.run_file\n"
                                            f"    params: {{path: {run}, k: 100}}\n")
    result = benchmark(BenchOptions(dataset=root, flows=["bm25=bm25", f"anserini={tmp_path / 'anserini.yaml'}"],
                                    out=tmp_path / "out", ks=[10, 100], baselines=["anserini"], mlflow=False))
    measures = [nDCG @ 10, AP @ 100, R @ 100, P @ 10]  # pytrec_eval's: ties by docno, descending
    qrels = list(ir_measures.read_trec_qrels(str(root / "qrels" / "test.tsv")))
    theirs = ir_measures.calc_aggregate(measures, qrels, ir_measures.read_trec_run(str(run)))
    ours = result.metrics_dict()["anserini"]
    assert {str(m): round(v, 12) for m, v in theirs.items()} == {str(m): round(ours[str(m)], 12) for m in measures}
    assert theirs[R @ 100] > 0  # the tie order finds some of the judged abstracts
    # RR@10 is ir-measures' msmarco provider's, which breaks ties by docno ascending (docs/benchmarks.md): the
    # benchmark's is trec_eval's order, as ir-measures gives it on the run read in that order
    read = read_trec_run(run)
    ranked = [ir_measures.ScoredDoc(q, d, -r) for q, d, r in zip(*(read[c].to_pylist() for c in ("qid", "docno",
                                                                                                   "rank")))]
    assert round(ours["RR@10"], 12) == round(ir_measures.calc_aggregate([RR @ 10], qrels, ranked)[RR @ 10], 12)
    assert ours["RR@10"] != ir_measures.calc_aggregate([RR @ 10], qrels, ir_measures.read_trec_run(str(run)))[RR @ 10]
    better = [c for c in result.comparisons if c.flow == "bm25" and c.measure == "nDCG@10"]
    assert better and better[0].baseline == "anserini" and better[0].delta > 0
