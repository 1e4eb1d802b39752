"""Tessera from Python: ingest a corpus, search it, load and run flows.

::

    from flows.api import Flow, ingest

    index = ingest("data/sample/corpus.jsonl", ".tessera/indices/sample", shard_size=250)
    hits = index.search("gothic cathedrals", k=5)
    flow = Flow.load("hybrid", index=index)
    result = flow.run(["gothic cathedrals", "honey bees"])
    result.table, result.history["bm25"], result.steps["fused"].seconds

This is a thin layer over the engine (``flows.spec``, ``flows.executors``) and the ingestion job (``flows.ingestion``)
with the defaults a notebook wants: in-process execution, no step cache unless asked for, every step's output kept.
Everything it returns is the engine's own (``FlowResult``, pyarrow tables), so nothing here hides what the CLI and the
service use.

The API is a package: ``Flow`` and ``Index`` live in ``flows.api.flow_and_index``, the step caches runs share in
``flows.api.step_caches``, the refusals in a Python caller's words in ``flows.api.refusals``, ``ingest``'s run in
``flows.api.ingesting``, documents held in memory in ``flows.api.documents`` and an index's changes (``Index.add``,
``update``, ``delete``) in ``flows.api.index_changes``; import them from here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from flows.api.flow_and_index import Flow, Index, Queries, SearchMethod  # noqa: F401 - Queries, SearchMethod: as before
from flows.api.step_caches import KEPT_CACHES  # noqa: F401
from flows.model_check import MissingEnvError, MissingModelsError
from operators.errors import FlowCancelled, OperatorError, ParamsError, SpecError, TesseraError

if TYPE_CHECKING:
    import pyarrow as pa

# the errors to catch: TesseraError is the base of every error Tessera raises on purpose
__all__ = ["Flow", "Index", "ingest", "TesseraError", "SpecError", "ParamsError", "OperatorError",
           "MissingModelsError", "MissingEnvError", "FlowCancelled"]


def ingest(source: "str | os.PathLike | dict | list[dict] | pa.Table | None", index: "str | os.PathLike | Index", *,
           spec: str | dict | None = "ingest", executor: Literal["local", "ray"] = "local", progress: bool = True,
           **options: Any) -> Index:
    """Ingest ``source`` into the index folder ``index`` and return the ``Index``; run it again to resume.

    ``source`` is a file, a glob or a folder, a read step ``{"op": ..., "params": ...}``, or documents in memory: a
    list of dicts, a pandas DataFrame or a pyarrow Table (``_id``/``id``, ``title``, ``text``; other fields are
    metadata), ingested from a temporary Parquet file (``flows.api.documents``).

    ``spec`` is the ingestion flow (the built-in ``ingest``: passages of 200 MiniLM word pieces, BM25 and
    FAISS, as ``tessera ingest``); ``options`` go to ``flows.ingestion.ingest`` (``shard_size``, ``settings``,
    ``chunk``, ``retry_failed``, ``colbert``, ``replace``, ``sync``, ``encoding``, ``fields``). In-process by
    default; ``executor="ray"`` embeds on Ray Data actors. ``index`` may be an ``Index`` already open: the
    documents are added to it.
    """
    from flows.api.ingesting import ingested
    from operators.store import Index as StoreIndex

    if isinstance(index, Index):
        index = index.path
    report = ingested(source, index, call="ingest()", spec=spec, executor=executor, progress=progress, **options)
    return Index(StoreIndex.open(report.index), report)
