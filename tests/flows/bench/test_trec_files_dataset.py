"""A researcher's own data in TREC formats (a TREC topic file, ``qid Q0 docno grade`` qrels with a -1 grade and a
qid no topic has) beside a SciFact corpus: ``tessera bench`` names each file it does not read with what to do (the
command that writes queries.jsonl from the topics, where to move the qrels), and once done its figures are
ir-measures' on its TREC run file and the researcher's own qrels."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import ir_measures
import pytest
from ir_measures import AP, RR, R, P, nDCG

pytestmark = [pytest.mark.data, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def trec_folder(shared_data, tmp_path):
    """corpus.jsonl (SciFact's first 200 abstracts and those judged), topics.trec and qrels.trec of 12 queries."""
    scifact, root = shared_data / "scifact", tmp_path / "mine"
    root.mkdir()
    rows = [line.split("\t") for line in (scifact / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    qids = list(dict.fromkeys(q for q, _, _ in rows))[:12]
    judged = {d for q, d, _ in rows if q in qids}
    with open(scifact / "corpus.jsonl") as corpus, open(root / "corpus.jsonl", "w") as out:
        out.writelines(line for n, line in enumerate(corpus) if n < 200 or json.loads(line)["_id"] in judged)
    texts = {r["_id"]: r["text"] for r in map(json.loads, (scifact / "queries.jsonl").read_text().splitlines())}
    (root / "topics.trec").write_text("".join(f"<top>\n<num> Number: {q}\n<title> {texts[q]}\n<desc> Description:\n"
                                              f"What does it say?\n</top>\n\n" for q in qids))
    other = next(d for q, d, _ in rows if q not in qids)
    (root / "qrels.trec").write_text("".join(f"{q} Q0 {d} {g}\n" for q, d, g in rows if q in qids)
                                     + f"{qids[0]} Q0 {other} -1\n" + "99999 Q0 4983 2\n")  # a qid without a topic
    return root, qids


def test_trec_topics_and_qrels_are_named_with_what_to_do_then_scored_as_ir_measures_scores_them(trec_folder, bench):
    root, qids = trec_folder
    out = root.parent / "out"
    args = ("--dataset", root, "--flow", "bm25", "--out", out, "--no-mlflow", "--k", "10,100")
    status, _, err = bench(*args)
    assert status == 2 and f"it has topics.trec, {len(qids)} queries" in err, err
    command = shlex.split(err.split("write queries.jsonl from it: ", 1)[1].strip())
    assert command[:2] == ["python", "-c"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, *command[1:]], check=True, env=env, cwd=root.parent)
    assert [json.loads(line)["_id"] for line in (root / "queries.jsonl").read_text().splitlines()] == qids

    status, _, err = bench(*args)
    assert status == 2 and f"{root / 'qrels.trec'} is not read" in err
    assert f"move it to {root / 'qrels' / 'test.tsv'}" in err
    (root / "qrels").mkdir()
    (root / "qrels.trec").rename(root / "qrels" / "test.tsv")

    status, _, err = bench(*args)
    assert status == 0, err
    assert "1 judged queries of" in err and "'99999'" in err  # the qid without a topic is said, not scored
    figures = json.loads((out / "metrics.json").read_text())["bm25"]
    run = list(ir_measures.read_trec_run(str(next((out / "runs").glob("bm25-*.trec")))))
    qrels = [q for q in ir_measures.read_trec_qrels(str(root / "qrels" / "test.tsv")) if q.query_id != "99999"]
    theirs = ir_measures.calc_aggregate([nDCG @ 10, RR @ 10, AP @ 100, R @ 100, P @ 10], qrels, run)
    assert {str(m): round(v, 12) for m, v in theirs.items()} == {
        m: round(figures[m], 12) for m in ("nDCG@10", "RR@10", "AP@100", "R@100", "P@10")}
    assert theirs[nDCG @ 10] > 0.5
