"""A BEIR-layout dataset as the benchmarker sees it: corpus path, judged queries, qrels.

``<dir>/corpus.jsonl``, ``<dir>/queries.jsonl``, ``<dir>/qrels/<split>.tsv``, and the
gold answers of ``<dir>/questions.jsonl`` where the set has one (``flows.bench.answers``). The
queries evaluated are those of ``queries.jsonl`` (in file order) that have at least
one judgement in the split; ``limit`` keeps the first N of them. Qrels are cut to the
evaluated queries. ``fingerprint()`` hashes the content (order-independent), so a
run is keyed by what was asked and judged, not by file names or line order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from flows.bench.errors import BenchError


@dataclass(frozen=True)
class Dataset:
    root: Path
    split: str
    corpus: Path
    queries: pa.Table  # qid, query: the evaluated queries, in file order
    qrels: pa.Table  # qid, docno, relevance: judgements of the evaluated queries
    unjudged: int  # queries in queries.jsonl without judgements in this split (not evaluated)
    missing: int  # judged qids absent from queries.jsonl (cannot be evaluated)
    answers: dict[str, list[str]] = field(default_factory=dict)  # qid -> gold answer and aliases (questions.jsonl)

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def qids(self) -> list[str]:
        return self.queries.column("qid").to_pylist()

    def queries_fingerprint(self) -> str:
        return _rows_sha256(self.queries, ["qid", "query"])

    def qrels_fingerprint(self) -> str:
        return _rows_sha256(self.qrels, ["qid", "docno", "relevance"])

    def corpus_sha256(self) -> str:
        from operators.atomic import file_sha256

        return file_sha256(self.corpus)


def _rows_sha256(table: pa.Table, columns: list[str]) -> str:
    rows = sorted(zip(*(map(str, table.column(c).to_pylist()) for c in columns)))
    digest = hashlib.sha256()
    for row in rows:
        digest.update(("\t".join(row) + "\n").encode("utf-8"))
    return digest.hexdigest()


def load_dataset(folder: str | Path, *, split: str = "test", limit: int | None = None) -> Dataset:
    """Read a BEIR folder; every missing piece is a ``BenchError`` naming the path."""
    from flows.queries import read_queries
    from operators.errors import TesseraError
    from operators.sources._beir_files import load_qrels, qrels_splits

    root = Path(folder).expanduser()
    if root.is_file():
        raise BenchError(f"dataset '{folder}' is a file; give the BEIR folder that holds corpus.jsonl, "
                         "queries.jsonl and qrels/", field="dataset")
    if not root.is_dir():
        raise BenchError(f"dataset folder '{folder}' does not exist", field="dataset")
    corpus, queries_path = root / "corpus.jsonl", root / "queries.jsonl"
    for path in (corpus, queries_path):
        if not path.is_file():
            raise BenchError(f"dataset folder '{root}' has no {path.name} (BEIR layout: corpus.jsonl, "
                             "queries.jsonl, qrels/<split>.tsv)", field="dataset")
    if not (root / "qrels" / f"{split}.tsv").is_file():
        raise BenchError(f"no qrels file '{root / 'qrels' / f'{split}.tsv'}' (splits there: "
                         f"{', '.join(qrels_splits(root)) or 'none'})", field="split")
    try:
        qrels = load_qrels(root, split)
        queries = read_queries(queries_path)
    except TesseraError as err:
        raise BenchError(err.message, field="dataset") from None
    judged = set(qrels.column("qid").to_pylist())
    known = queries.column("qid").to_pylist()
    keep = pc.is_in(queries.column("qid"), value_set=pa.array(sorted(judged), pa.string()))
    evaluated = queries.filter(keep)
    if limit is not None:
        evaluated = evaluated.slice(0, limit)
    if evaluated.num_rows == 0:
        raise BenchError(f"no query of {queries_path} has judgements in qrels/{split}.tsv", field="dataset")
    qrels = qrels.filter(pc.is_in(qrels.column("qid"), value_set=evaluated.column("qid")))
    from flows.bench.answers import load_gold

    return Dataset(root=root, split=split, corpus=corpus, queries=evaluated, qrels=qrels,
                   unjudged=len(known) - int(pc.sum(keep).as_py() or 0), missing=len(judged - set(known)),
                   answers=load_gold(root / "questions.jsonl", evaluated.column("qid").to_pylist()))
