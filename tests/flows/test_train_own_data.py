"""Mining ``tessera train``'s examples from a small labelled set of the user's own, written by the test.

Ten documents and four judged queries: small enough that BM25 (which returns only documents sharing a word
with the query) leaves some queries without a hard negative. Such a judgement gives no example, and the
user is told so, as for ids that match nothing. Files as users leave them (a byte order mark, Windows line
ends, a judgement written twice) give one example per judgement. Mining runs for real: a BM25 index in the
test's own folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CORPUS = {
    "d1": "Daily low-dose aspirin reduces the risk of a first heart attack in older adults.",
    "d2": "Aspirin can cause stomach bleeding in older adults.",
    "d3": "Caffeine in coffee delays sleep onset and shortens deep sleep.",
    "d4": "Decaffeinated coffee has little effect on sleep.",
    "d5": "Aerobic exercise reduces symptoms of mild depression.",
    "d6": "Paris is the capital of France.",
    "d7": "Smoking tobacco causes lung cancer.",
    "d8": "Salt intake raises blood pressure.",
    "d9": "Statins lower cholesterol.",
    "d10": "Vitamin D does not prevent fractures.",
}
QUERIES = {"q1": "aspirin heart attack", "q2": "coffee sleep", "q3": "exercise depression", "q4": "Paris"}
FLOW = "name: tiny\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 5}}\n"  # the mining flow


def _dataset(root: Path, qrels: str) -> Path:
    (root / "qrels").mkdir(parents=True)
    # as a Windows editor saves it: a byte order mark, CRLF line ends (ingestion reads it so)
    lines = "".join(json.dumps({"_id": k, "text": t}) + "\r\n" for k, t in CORPUS.items())
    (root / "corpus.jsonl").write_bytes(("\ufeff" + lines).encode("utf-8"))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": t}) + "\n" for k, t in QUERIES.items()),
                                        encoding="utf-8")
    (root / "qrels" / "train.tsv").write_text(qrels, encoding="utf-8")
    (root / "mining.yaml").write_text(FLOW, encoding="utf-8")
    return root


@pytest.mark.slow  # mining builds a BM25 index: about 3 s on 2 busy cores
def test_judgements_without_a_hard_negative_are_warned_and_written_twice_count_once(tmp_path, monkeypatch):
    from flows.train.mining import MiningParams, mine

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    # a BOM before the first judgement, q2's judgement written twice; q3 and q4 retrieve only their relevant document
    data = _dataset(tmp_path / "mine", "\ufeffq1\td1\t1\nq2\td3\t1\nq2\td3\t1\nq3\td5\t1\nq4\td6\t1\n")
    logged: list[str] = []
    mined = mine(data, data / "mining.yaml", params=MiningParams(negatives=1), index_dir=tmp_path / "indices",
                 progress=False, log=logged.append)
    assert sorted((e["qid"], e["positive_id"], *e["negative_ids"]) for e in mined.examples) == [
        ("q1", "d1", "d2"), ("q2", "d3", "d4")]
    warnings = [line for line in logged if line.startswith("warning:")]
    assert len(warnings) == 1, logged
    assert warnings[0].startswith(f"warning: 2 of 4 relevant judgements in {data / 'qrels' / 'train.tsv'} give no "
                                  "example: the mining flow retrieved no other document for their query")
    assert mined.stats["positives_without_negatives"] == 2


def test_pseudo_queries_read_a_corpus_with_a_byte_order_mark(tmp_path):
    from flows.train.synthetic import SyntheticParams, pseudo_queries

    data = _dataset(tmp_path / "bom", "q1\td1\t1\n")
    first = json.dumps({"_id": "d0", "text": "Aspirin thins the blood of adults. It also reduces fever in children."})
    corpus = data / "corpus.jsonl"
    corpus.write_bytes(("\ufeff" + first + "\r\n").encode("utf-8") + corpus.read_bytes()[3:])
    drawn = pseudo_queries(corpus, SyntheticParams(queries=1, min_words=3))
    assert [(p.qid, p.docno) for p in drawn] == [("pseudo-d0", "d0")]


@pytest.mark.parametrize("splits, said", [
    (["test"], "(splits there: test; test is for evaluation, which training never reads: add qrels/train.tsv of "
               "training judgements, or give --split test --allow-eval-split if the set is a training set whose only "
               "qrels file has that name)"),
    (["dev", "mine"], "(splits there: dev, mine; dev is for evaluation, which training never reads: give --split "
                      "mine)"),
])
def test_a_set_without_a_train_split_is_not_told_to_give_an_evaluation_split(tmp_path, splits, said):
    """A set of qrels/test.tsv alone was told 'the only split there is 'test': give --split test', which training
    then refused as an evaluation split."""
    from flows.train.errors import TrainError
    from flows.train.splits import load_training_split

    data = _dataset(tmp_path / "d", "q1\td1\t1\n")
    (data / "qrels" / "train.tsv").unlink()
    for split in splits:
        (data / "qrels" / f"{split}.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    with pytest.raises(TrainError) as err:
        load_training_split(data, "train")
    assert err.value.field == "split"
    assert err.value.message == f"no qrels file '{data / 'qrels' / 'train.tsv'}' {said}"
    assert load_training_split(data, splits[0], allow_eval_split=True).split == splits[0]
