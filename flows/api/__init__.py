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
``flows.api.step_caches``, the refusals in a Python caller's words in ``flows.api.refusals``; import them from here.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any, Literal

from flows.api.flow_and_index import Flow, Index, Queries, SearchMethod  # noqa: F401 - Queries, SearchMethod: as before
from flows.api.step_caches import KEPT_CACHES  # noqa: F401
from flows.keywords import check_keywords
from flows.model_check import MissingEnvError, MissingModelsError
from operators.errors import FlowCancelled, OperatorError, ParamsError, SpecError, TesseraError

# the errors to catch: TesseraError is the base of every error Tessera raises on purpose
__all__ = ["Flow", "Index", "ingest", "TesseraError", "SpecError", "ParamsError", "OperatorError",
           "MissingModelsError", "MissingEnvError", "FlowCancelled"]


def ingest(source: str | os.PathLike | dict | None, index: "str | os.PathLike | Index", *,
           spec: str | dict | None = "ingest", executor: Literal["local", "ray"] = "local", progress: bool = True,
           **options: Any) -> Index:
    """Ingest ``source`` into the index folder ``index`` and return the ``Index``; run it again to resume.

    ``spec`` is the ingestion flow (the built-in ``ingest``: passages of 200 MiniLM word pieces, BM25 and
    FAISS, as ``tessera ingest``); ``options`` go to ``flows.ingestion.ingest`` (``shard_size``, ``settings``,
    ``chunk``, ``retry_failed``, ``colbert``, ``replace``, ``sync``, ``encoding``, ``fields``). In-process by
    default; ``executor="ray"`` embeds on Ray Data actors. ``index`` may be an ``Index`` already open: the
    documents are added to it.
    """
    from flows.ingestion import ingest as run_ingestion
    from flows.ingestion.errors import NothingIngestedError, SettingsMismatchError
    from flows.ingestion.first_ingest import resume_in_python
    from flows.model_check import MissingModelsError
    from flows.train import train_command
    from operators.store import Index as StoreIndex

    if isinstance(index, Index):
        index = index.path
    known = set(inspect.signature(run_ingestion).parameters) - {"source", "index"}  # its own spec, executor, ...
    check_keywords("ingest()", options, known)  # Python's own TypeError names the typo only: say which was meant
    if source is None and spec == "ingest" and not options.get("retry_failed"):
        # the built-in spec's own path is the bundled sample: ingest(None, ...) ingested it, where data/ was there
        from flows.ingestion.errors import IngestError

        raise IngestError("source is None: give the file, glob or folder to ingest (None is for a spec= whose read "
                          "step names its own source, or retry_failed=True)", field="source")
    try:
        report = run_ingestion(source, index, spec=spec, executor=executor, progress=progress, **options)
    except MissingModelsError as err:  # with the tessera train command that makes each, as Flow.run says
        raise err.made_by(train_command) from None
    except SettingsMismatchError as err:  # the call that resumes, not the tessera command
        raise resume_in_python(err) from None
    if report.nothing_ingested:  # as tessera ingest exits 1: an empty Index returned read as a success
        raise NothingIngestedError(report)
    if progress and report.nothing_to_do and not options.get("retry_failed"):  # as tessera ingest says it
        from flows.ingestion.report import NOTHING_TO_DO

        print(f"{report.index}: {NOTHING_TO_DO}", file=sys.stderr, flush=True)
    return Index(StoreIndex.open(report.index), report)
