"""The judged documents of each query, read from a BEIR dataset's qrels: the oracle retriever."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.atomic import file_sha256
from operators.base import Operator
from operators.errors import OperatorError
from operators.local_files import local_path
from operators.tables import query_rows, ranking_columns, set_ranking


class GoldRetriever(Operator):
    """Return each query's judged documents (its gold passages) from a BEIR dataset's qrels.

    An upper bound, not a retriever: the answer a language model gives from the gold
    passages is the best it can do with perfect retrieval (``rag_gold``). ``dataset`` is a
    BEIR folder (``corpus.jsonl``, ``qrels/<split>.tsv``); ``tessera bench`` fills an
    unset one with the benchmark's dataset and split. Each query gets the documents judged
    ``min_relevance`` or above, best grade first, ties by docno (``score`` is the
    grade). A query is the dataset's by its qid when its text is that query's in
    ``queries.jsonl``, else by its text (``tessera run rag_gold --queries "..."`` numbers
    its queries 1, 2, ...: the qid alone gave a question the gold of another); a query
    that is neither, or without judgements, gets no rows. The cache key includes the
    files' content hashes.

    Usage::

        GoldRetriever({"dataset": "../shared/data/hotpotqa_dev_subset"})(
            pa.table({"qid": ["5a8c7595554299585d9e36b6"], "query": ["..."]}))   # its 2 gold paragraphs
    """

    name = "retrieve.gold"
    aliases = ("retrieve.qrels",)
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        dataset: str | None = Field(None, json_schema_extra=local_path(), description="A BEIR dataset folder "
                                    "(corpus.jsonl, qrels/SPLIT.tsv); null: set by `tessera bench` to the "
                                    "benchmark's dataset.")
        split: str = Field("test", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="The qrels file: "
                           "qrels/SPLIT.tsv (a name: letters, digits, '_', '.', '-').")
        min_relevance: int = Field(1, ge=1, description="Lowest grade that counts as gold.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._gold: dict[str, list[tuple[str, int]]] | None = None
        self._texts: dict[str, str] | None = None  # qid -> query text, of queries.jsonl (None: the folder has none)
        self._qid_of: dict[str, str] = {}  # query text -> its first qid

    def reads(self) -> list[str]:
        return ["qid", "query"]

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "title": "data", "text": "text", **ranking_columns(self.step_id)}

    def unset_params(self) -> dict[str, str]:
        if self.params.dataset is not None:
            return {}
        return {"params.dataset": "the BEIR folder whose judged documents it reads; `tessera bench` sets it to the "
                "benchmark's dataset"}

    def missing_files(self) -> dict[str, str]:
        if self.params.dataset is None:  # unset_params says so
            return {}
        return {field: f"{path} not found" for path, field in zip(self._files(), ("params.dataset", "params.split"))
                if not path.is_file()}

    def _files(self) -> tuple[Path, Path]:
        """(corpus.jsonl, qrels/SPLIT.tsv) of ``dataset``."""
        root = Path(self.params.dataset or ".").expanduser()
        return root / "corpus.jsonl", root / "qrels" / f"{self.params.split}.tsv"

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        if self.params.dataset is not None:
            queries = self._files()[0].parent / "queries.jsonl"
            identity["sha256"] = [file_sha256(p) if p.is_file() else None for p in (*self._files(), queries)]
        return identity

    def setup(self) -> None:
        with self._lock:
            if self._gold is not None:
                return
            if self.params.dataset is None:
                raise OperatorError("no dataset: set params.dataset to a BEIR folder (tessera bench sets it)",
                                    op=self.name, step=self.step_id, field="params.dataset")
            for field, why in self.missing_files().items():
                raise OperatorError(why, op=self.name, step=self.step_id, field=field)
            corpus, qrels = self._files()
            from operators.sources._beir_files import load_qrels

            # The reader tessera bench measures with: BEIR's header or TREC's four columns, errors naming the line.
            judged = load_qrels(qrels.parent.parent, self.params.split, op=self)
            gold: dict[str, list[tuple[str, int]]] = {}
            for qid, docno, grade in zip(*(judged.column(c).to_pylist() for c in ("qid", "docno", "relevance"))):
                if grade >= self.params.min_relevance:
                    gold.setdefault(qid, []).append((docno, grade))
            from operators.sources.jsonl import JsonlSource

            docs = JsonlSource({"path": str(corpus), "fields": []}, step_id=self.step_id)(pa.table({}))
            wanted = {d for found in gold.values() for d, _ in found}
            titles = docs.column("title").to_pylist() if "title" in docs.column_names else [""] * docs.num_rows
            self._docs = {d: (t or "", x or "") for d, t, x in zip(docs.column("docno").to_pylist(), titles,
                                                                      docs.column("text").to_pylist()) if d in wanted}
            missing = sorted(wanted - set(self._docs))
            if missing:
                raise OperatorError(f"{len(missing)} judged documents are not in {corpus} (first: {missing[0]})",
                                    op=self.name, step=self.step_id, field="params.dataset")
            self._read_queries(corpus.parent / "queries.jsonl")
            self._gold = gold

    def _read_queries(self, path: Path) -> None:
        """The dataset's query texts, by which a query is told to be the dataset's (``_judged``)."""
        if not path.is_file():
            return
        from operators.sources.beir import BeirSource

        queries = BeirSource({"folder": str(path.parent), "part": "queries", "split": None, "fields": []},
                             step_id=self.step_id)(pa.table({}))
        self._texts = dict(zip(map(str, queries.column("qid").to_pylist()),
                               map(_spaced, queries.column("query").to_pylist())))
        for qid, text in self._texts.items():
            self._qid_of.setdefault(text, qid)

    def _judged(self, qid: str, query: str | None) -> list[tuple[str, int]]:
        """The gold of the dataset's query that this one is: the same qid and text, else the same text."""
        if self._texts is None:  # no queries.jsonl to tell them apart: by qid
            return self._gold.get(qid, [])
        text = _spaced(query)
        if self._texts.get(qid) == text:
            return self._gold.get(qid, [])
        return self._gold.get(self._qid_of.get(text, ""), [])

    def transform(self, table: pa.Table) -> pa.Table:
        owned = set(self.produces())  # input columns of the same names are replaced
        queries = query_rows(table, owned)
        rows, docnos, grades = [], [], []
        texts = queries.column("query").to_pylist() if "query" in queries.column_names else [None] * queries.num_rows
        for i, (qid, query) in enumerate(zip(queries.column("qid").to_pylist() if queries.num_rows else [], texts)):
            found = self._judged(str(qid), query)
            rows += [i] * len(found)
            docnos += [d for d, _ in found]
            grades += [float(g) for _, g in found]
        out = queries.take(pa.array(rows, pa.int64()))
        out = out.append_column("docno", pa.array(docnos, pa.string()))
        out = out.append_column("title", pa.array([self._docs[d][0] for d in docnos], pa.string()))
        out = out.append_column("text", pa.array([self._docs[d][1] for d in docnos], pa.string()))
        return set_ranking(out, pa.array(grades, pa.float64()), self.step_id)


def _spaced(text: str | None) -> str:
    """A query's text with its runs of whitespace as one space, as compared."""
    return " ".join(str(text or "").split())
