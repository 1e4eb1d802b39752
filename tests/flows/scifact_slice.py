"""A small BEIR folder cut from SciFact, shared by the training tests (``test_train``, ``test_train_checks``).

Real queries with their real train judgements, the documents those name and some others: small enough to
mine (BM25 only) and train on in seconds. Each test file writes its own recipe beside it; their settings
differ on purpose (one trains in-batch negatives, the other mines synthetic queries).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO.parent / "shared" / "data" / "scifact"

#: The marks of a module that needs SciFact: it is data, and skipped where the shared evaluation data is absent.
NEEDS_SCIFACT = [pytest.mark.data,
                 pytest.mark.skipif(not (SCIFACT / "qrels" / "train.tsv").is_file(),
                                    reason=f"SciFact is not at {SCIFACT} (the shared evaluation data)")]


def qrels_rows(root: Path, split: str) -> list[tuple[str, ...]]:
    """The judgements (query id, document id, score) of ``root/qrels/<split>.tsv``, header skipped."""
    lines = (root / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [tuple(line.split("\t")) for line in lines if line.strip()]


def write_qrels(root: Path, split: str, rows: list[tuple[str, ...]]) -> None:
    text = "query-id\tcorpus-id\tscore\n" + "".join("\t".join(r) + "\n" for r in rows)
    (root / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")


def write_slice(root: Path, recipe: str, *, train_queries: int, other_docs: int, test_judgements: int = 0) -> Path:
    """``root`` as a BEIR folder with ``recipe.yaml``: SciFact's first ``train_queries`` train queries and their
    train judgements, its first ``test_judgements`` test judgements (``qrels/test.tsv`` only when there are any)
    with their queries, every document these name and SciFact's first ``other_docs`` documents."""
    qids = list(dict.fromkeys(q for q, _, _ in qrels_rows(SCIFACT, "train")))[:train_queries]
    train = [r for r in qrels_rows(SCIFACT, "train") if r[0] in qids]
    test = qrels_rows(SCIFACT, "test")[:test_judgements]
    wanted = {d for _, d, _ in train + test}
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
        docs = [line for number, line in enumerate(f) if number < other_docs or json.loads(line)["_id"] in wanted]
    (root / "corpus.jsonl").write_text("".join(docs), encoding="utf-8")
    keep = set(qids) | {q for q, _, _ in test}
    queries = [line for line in (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if json.loads(line)["_id"] in keep]
    (root / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (root / "qrels").mkdir()
    write_qrels(root, "train", train)
    if test:
        write_qrels(root, "test", test)
    (root / "recipe.yaml").write_text(recipe, encoding="utf-8")
    return root
