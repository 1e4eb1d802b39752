"""Answer measures: SQuAD EM/F1 on real HotpotQA and MuSiQue answers, and ``tessera bench`` scoring flows that
answer."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import BaseModel, ConfigDict, Field

from flows.bench import answers
from operators.base import Operator

pytestmark = pytest.mark.data

N_QUESTIONS = 20


def questions(shared_data: Path, name: str) -> list[dict]:
    lines = (shared_data / name / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_gold_answers_score_one_and_other_answers_zero(shared_data):
    asked = questions(shared_data, "hotpotqa_dev_subset")[:50]
    for q, other in zip(asked, asked[1:] + asked[:1]):
        gold = [q["answer"], *q["answer_aliases"]]
        assert answers.scores(q["answer"], gold) == (1.0, 1.0)
        assert answers.scores(f"The {q['answer'].upper()}.", gold)[0] == 1.0  # case, article, punctuation
        if not set(other["answer"].lower().split()) & set(q["answer"].lower().split()):
            assert answers.scores(other["answer"], gold) == (0.0, 0.0)
    assert answers.scores("", ["Chief of Protocol"]) == (0.0, 0.0)


def test_f1_counts_shared_tokens_and_takes_the_best_alias(shared_data):
    asked = [q for q in questions(shared_data, "musique_dev_subset") if q["answer_aliases"]]
    assert asked, "MuSiQue's dev subset has questions with aliases"
    for q in asked[:20]:
        alias = q["answer_aliases"][0]
        assert answers.scores(alias, [q["answer"], *q["answer_aliases"]])[0] == 1.0
    # an answer of n plain words, one of them given: precision 1, recall 1/n, F1 = 2 / (n + 1)
    words = next(q["answer"].split() for q in questions(shared_data, "hotpotqa_dev_subset")
                 if len(q["answer"].split()) >= 3 and all(w.isalpha() and w.lower() not in ("a", "an", "the")
                                                          for w in q["answer"].split())
                 and len({w.lower() for w in q["answer"].split()}) == len(q["answer"].split()))
    em, f1 = answers.scores(words[0], [" ".join(words)])
    assert em == 0.0 and f1 == pytest.approx(2 / (len(words) + 1))


def test_an_abstained_query_counts_as_unanswered():
    """The no-answer text is no answer: scored as one it could share a word with a gold answer ("answer")."""
    meta = {"1": {"answer": "Mount Everest"},
            "2": {"answer": "The documents found do not answer this question.", "abstained": True}}
    assert answers.flow_answers(meta) == {"1": "Mount Everest"}
    values = answers.per_query(answers.flow_answers(meta), {"1": ["Everest"], "2": ["the question answer"]}, ["1", "2"])
    assert values["AnswerF1"] == {"1": pytest.approx(2 / 3), "2": 0.0}


class GoldAnswerer(Operator):
    """Answer each query with its gold answer from questions.jsonl, or a wrong one for every n-th query."""

    name = "test.gold_answer"
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        questions: str = Field(description="questions.jsonl with _id and answer.")
        wrong_every: int = Field(0, ge=0, description="Answer wrongly the queries whose position is a multiple of "
                                 "this (0: never).")

    def transform(self, table: pa.Table) -> pa.Table:
        gold = {q["_id"]: q["answer"] for q in map(json.loads, Path(self.params.questions).read_text().splitlines())}
        for i, qid in enumerate(sorted(set(table.column("qid").to_pylist()))):
            every = self.params.wrong_every
            self.emit_metadata(qid, "answer", "zzz qqq" if every and i % every == 0 else gold[qid])
        return table


@pytest.fixture
def hotpot_slice(shared_data, tmp_path) -> Path:
    """The first 20 HotpotQA dev questions with their own paragraphs as the corpus, in BEIR layout."""
    src = shared_data / "hotpotqa_dev_subset"
    asked = questions(shared_data, "hotpotqa_dev_subset")[:N_QUESTIONS]
    ids = {q["_id"] for q in asked}
    keep = {d for q in asked for d in q["context_corpus_ids"]}
    root = tmp_path / "hotpot20"
    (root / "qrels").mkdir(parents=True)
    corpus = [line for line in (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
              if json.loads(line)["_id"] in keep]
    (root / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    for name in ("queries.jsonl", "questions.jsonl"):
        lines = [line for line in (src / name).read_text(encoding="utf-8").splitlines()
                 if json.loads(line)["_id"] in ids]
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    qrels = (src / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    (root / "qrels" / "test.tsv").write_text("\n".join([qrels[0], *(line for line in qrels[1:]
                                                                      if line.split("\t")[0] in ids)]) + "\n")
    return root


def test_bench_scores_answers_beside_retrieval_with_paired_tests(bench, hotpot_slice, tmp_path, monkeypatch):
    from scipy import stats  # here, not at the top: make test-fast collects this module (data) only to leave it

    from operators import registry

    registry.all_operators()
    monkeypatch.setitem(registry._registry, GoldAnswerer.name, GoldAnswerer)
    corpus, gold = hotpot_slice / "corpus.jsonl", hotpot_slice / "questions.jsonl"
    retrieve = f"  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: '{corpus}', k: 10}}}}\n"
    specs = {"plain": "", "oracle": f"  answer: {{op: test.gold_answer, params: {{questions: '{gold}'}}}}\n",
             "half": f"  answer: {{op: test.gold_answer, params: {{questions: '{gold}', wrong_every: 2}}}}\n"}
    for name, answer in specs.items():
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\nsteps:\n{retrieve}{answer}", encoding="utf-8")
    # retrieve.gold reads the benchmark's own qrels (rag_gold); a flow may answer without retrieving (answer_only)
    specs["gold"], specs["closed"] = "", ""
    (tmp_path / "gold.yaml").write_text("name: gold\nsteps:\n  gold: {op: retrieve.gold}\n", encoding="utf-8")
    (tmp_path / "closed.yaml").write_text(f"name: closed\nsteps:\n{specs['oracle']}", encoding="utf-8")
    out = tmp_path / "out"
    args = ["--dataset", hotpot_slice, "--out", out, "--k", "10", "--no-mlflow", "--baseline", "half",
            *(a for name in specs for a in ("--flow", f"{name}={tmp_path / name}.yaml"))]
    status, stdout, stderr = bench(*args)
    assert status == 0, stderr
    means = json.loads((out / "metrics.json").read_text())
    assert means["oracle"]["AnswerEM"] == 1.0 and means["oracle"]["AnswerF1"] == 1.0
    assert means["half"]["AnswerEM"] == 0.5  # the wrong answer shares no token with any gold answer here
    assert "AnswerEM" not in means["plain"] and means["plain"]["nDCG@10"] == means["oracle"]["nDCG@10"]
    assert means["gold"]["PerfectRecall@10"] == 1.0 and means["gold"]["nDCG@10"] == 1.0
    assert means["closed"]["AnswerEM"] == 1.0 and means["closed"]["R@10"] == 0.0
    assert "flow 'closed' answers without retrieving: its retrieval measures are 0" in stderr
    rows = {(r["flow"], r["measure"]): r for r in csv.DictReader(open(out / "significance.csv", encoding="utf-8"))}
    em = rows[("oracle", "AnswerEM")]
    expected = stats.ttest_rel([1.0] * N_QUESTIONS, [float(i % 2) for i in range(N_QUESTIONS)]).pvalue
    assert (int(em["wins"]), int(em["ties"]), int(em["n"])) == (N_QUESTIONS // 2, N_QUESTIONS // 2, N_QUESTIONS)
    assert float(em["p"]) == pytest.approx(expected)
    assert ("plain", "AnswerEM") not in rows and ("plain", "nDCG@10") in rows
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## Answers" in report and "| oracle | 1.0000" in report
    status, _, stderr = bench(*args)  # from the run cache: the answers come back with the runs
    assert status == 0, stderr
    assert json.loads((out / "metrics.json").read_text())["oracle"]["AnswerEM"] == 1.0
    assert json.loads((out / "bench.json").read_text())["flows"]["oracle"]["cached"] is True

