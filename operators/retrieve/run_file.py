"""A TREC run made elsewhere (Anserini's BM25, a run of another system) as a retrieval step."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.atomic import file_sha256
from operators.base import Operator
from operators.errors import OperatorError, TesseraError
from operators.local_files import local_path
from operators.tables import query_rows, ranking_columns, set_ranking


class RunFileRetriever(Operator):
    """Return each query's documents from a TREC run file (``qid Q0 docno rank score tag`` a line).

    PyTerrier's ``Transformer.from_df(read_results(path))``: a run made elsewhere becomes a flow's first stage, to
    compare with Tessera's flows in ``tessera bench`` (its measures and paired tests, as a ``--baseline`` too) or
    to rerank. Each query gets its rows in the order trec_eval and ir-measures evaluate the file (score,
    descending; tied scores by docno, descending), its top ``k``, so the benchmark's figures are theirs on the
    file. Queries are matched by qid as written (``001`` is not ``1``); one the file lacks gets no rows. The rows
    hold ``docno`` and the ranking, no text: a reranker after it needs the documents' text from an index. A
    malformed line is an error naming ``FILE:LINE``. The cache key includes the file's content hash.

    Usage::

        RunFileRetriever({"path": "runs/bm25.anserini.trec", "k": 100})(pa.table({"qid": ["1"], "query": ["..."]}))
    """

    name = "retrieve.run_file"
    aliases = ("retrieve.trec_run",)
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str = Field(json_schema_extra=local_path(), description="The TREC run file: 'qid Q0 docno rank "
                          "score tag' a line, as trec_eval reads it.")
        k: int = Field(1000, ge=1, le=10_000, description="At most this many documents per query, the best.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._runs: dict[str, tuple[list[str], list[float]]] | None = None

    def reads(self) -> list[str]:
        return ["qid"]

    def produces(self) -> dict[str, str]:
        return {"docno": "id", **ranking_columns(self.step_id)}

    def missing_files(self) -> dict[str, str]:
        path = Path(self.params.path).expanduser()
        return {} if path.is_file() else {"params.path": f"no run file {path}"}

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        path = Path(self.params.path).expanduser()
        identity["sha256"] = file_sha256(path) if path.is_file() else None
        return identity

    def setup(self) -> None:
        with self._lock:
            if self._runs is not None:
                return
            from operators.trec_run_files import read_trec_run

            try:
                run = read_trec_run(self.params.path)
            except TesseraError as err:
                raise OperatorError(err.message, op=self.name, step=self.step_id, field="params.path") from None
            runs: dict[str, tuple[list[str], list[float]]] = {}
            for qid, docno, score in zip(*(run.column(c).to_pylist() for c in ("qid", "docno", "score"))):
                docnos, scores = runs.setdefault(qid, ([], []))
                if len(docnos) < self.params.k:
                    docnos.append(docno)
                    scores.append(score)
            self._runs = runs

    def transform(self, table: pa.Table) -> pa.Table:
        queries = query_rows(table, set(self.produces()))
        rows, docnos, scores = [], [], []
        for i, qid in enumerate(queries.column("qid").to_pylist() if queries.num_rows else []):
            found, their = self._runs.get(str(qid), ([], []))
            rows += [i] * len(found)
            docnos += found
            scores += their
        out = queries.take(pa.array(rows, pa.int64())).append_column("docno", pa.array(docnos, pa.string()))
        # already in trec_eval's order: set_ranking's own tie order (docno ascending) would be another
        return set_ranking(out, pa.array(scores, pa.float64()), self.step_id, groups=np.asarray(rows, np.int64),
                           ordered=True)
