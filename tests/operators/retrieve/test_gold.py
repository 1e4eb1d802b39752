"""retrieve.gold: the contract on a small BEIR folder, HotpotQA's gold paragraphs, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from operators.errors import OperatorError
from operators.registry import create
from operators.testing import SAMPLE_QUERIES, OperatorContract, sample_documents
from operators.testing import sample_queries as queries


def beir_folder(root: Path) -> Path:
    """Sample documents as a BEIR corpus; each sample query judges two of them (grades 2 and 1), and one more
    document with grade 1 is judged for a qid that is never asked."""
    docs = sample_documents(10).to_pylist()
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": d["docno"], "title": d["title"], "text": d["text"]})
                                               + "\n" for d in docs), encoding="utf-8")
    lines = ["query-id\tcorpus-id\tscore"]
    for i, qid in enumerate(SAMPLE_QUERIES):
        lines += [f"{qid}\t{docs[2 * i + 1]['docno']}\t1", f"{qid}\t{docs[2 * i]['docno']}\t2"]
    lines.append(f"nobody\t{docs[9]['docno']}\t1")
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


class TestGoldContract(OperatorContract):
    operator_name = "retrieve.gold"

    @pytest.fixture(autouse=True)
    def _folder(self, tmp_path):
        self.root = beir_folder(tmp_path)

    def make_operator(self, **params):
        return create("retrieve.gold", {"dataset": str(self.root), **params}, step_id="gold")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return queries(n_queries)


def test_each_query_gets_its_judged_documents_best_grade_first(tmp_path):
    root = beir_folder(tmp_path)
    docs = sample_documents(10).to_pylist()
    out = create("retrieve.gold", {"dataset": str(root)}, step_id="gold")(queries(3)).to_pylist()
    for i, qid in enumerate(list(SAMPLE_QUERIES)[:3]):
        mine = [r for r in out if r["qid"] == qid]
        assert [(r["docno"], r["rank"], r["score"]) for r in mine] == [
            (docs[2 * i]["docno"], 1, 2.0), (docs[2 * i + 1]["docno"], 2, 1.0)]
        assert mine[0]["title"] == docs[2 * i]["title"] and mine[0]["text"] == docs[2 * i]["text"]
    only_best = create("retrieve.gold", {"dataset": str(root), "min_relevance": 2}, step_id="gold")(queries(3))
    assert only_best.num_rows == 3
    unjudged = create("retrieve.gold", {"dataset": str(root)})(pa.table({"qid": ["other"], "query": ["x"]}))
    assert unjudged.num_rows == 0


def test_a_query_is_the_datasets_by_its_qid_and_text_or_by_its_text_alone(tmp_path):
    """``tessera run rag_gold --queries "..."`` numbers free-text queries 1, 2, ...: matched by qid alone, a
    question got the gold documents of the dataset's query "1", another question."""
    root = beir_folder(tmp_path)
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                                for q, t in SAMPLE_QUERIES.items()), encoding="utf-8")
    gold = create("retrieve.gold", {"dataset": str(root)}, step_id="gold")
    expected = gold(queries(3)).to_pylist()
    q2, q3 = SAMPLE_QUERIES["q2"], SAMPLE_QUERIES["q3"]
    out = gold(pa.table({"qid": ["q1", "1", "q3"], "query": ["what is a newt", f"  {q2.upper()}", q3]})).to_pylist()
    assert [r["qid"] for r in out] == ["q3", "q3"] and out == [r for r in expected if r["qid"] == "q3"]
    asked = gold(pa.table({"qid": ["1"], "query": [f" {q2}  "]})).to_pylist()  # asked as the dataset asks it
    assert [r["docno"] for r in asked] == [r["docno"] for r in expected if r["qid"] == "q2"]


def test_trec_qrels_give_the_gold_documents_beir_ones_do(tmp_path):
    """The qrels reader tessera bench measures with: TREC's four columns, no header (read as a BEIR table, it
    failed on the missing header)."""
    root = beir_folder(tmp_path / "beir")
    expected = create("retrieve.gold", {"dataset": str(root)}, step_id="gold")(queries(3))
    qrels = root / "qrels" / "test.tsv"
    judged = [line.split("\t") for line in qrels.read_text(encoding="utf-8").splitlines()[1:]]
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in judged), encoding="utf-8")
    assert create("retrieve.gold", {"dataset": str(root)}, step_id="gold")(queries(3)).equals(expected)


def test_missing_dataset_and_split_are_named(tmp_path):
    root = beir_folder(tmp_path)
    with pytest.raises(OperatorError, match="no dataset: set params.dataset") as err:
        create("retrieve.gold", {})(queries(1))
    assert err.value.field == "params.dataset"
    with pytest.raises(OperatorError, match="dev.tsv not found") as err:
        create("retrieve.gold", {"dataset": str(root), "split": "dev"})(queries(1))
    assert err.value.field == "params.split"


def test_the_cache_key_follows_the_qrels_content(tmp_path):
    from flows.cache import step_key

    root = beir_folder(tmp_path)
    before = step_key(create("retrieve.gold", {"dataset": str(root)}))
    qrels = root / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text(encoding="utf-8") + "nobody\tx\t1\n", encoding="utf-8")
    assert step_key(create("retrieve.gold", {"dataset": str(root)})) != before


@pytest.mark.data
def test_hotpotqa_questions_get_their_two_supporting_paragraphs(shared_data):
    root = shared_data / "hotpotqa_dev_subset"
    asked = [json.loads(line) for line in (root / "questions.jsonl").read_text(encoding="utf-8").splitlines()[:5]]
    out = create("retrieve.gold", {"dataset": str(root)})(
        pa.table({"qid": [q["_id"] for q in asked], "query": [q["question"] for q in asked]}))
    for q in asked:
        mine = [r for r in out.to_pylist() if r["qid"] == q["_id"]]
        assert sorted(r["docno"] for r in mine) == sorted(q["supporting_corpus_ids"])
        assert sorted(r["title"] for r in mine) == sorted(q["supporting_titles"])
