"""``ingest``'s run, shared by ``flows.api.ingest`` (which returns the ``Index``) and ``Index.add``/``update`` (which
return what the run did): the job with the Python caller's defaults, refusals and advice.

Why a module of its own: ``Index`` (``flows.api.flow_and_index``) calls it and ``flows.api`` imports ``Index``, so
neither could hold it without an import circle.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from flows.api.documents import documents_file, in_memory, materialized
from flows.keywords import check_keywords

if TYPE_CHECKING:
    from flows.ingestion import IngestReport


def ingested(source: Any, index: "str | os.PathLike", *, call: str, spec: Any, executor: str, progress: bool,
             **options: Any) -> "IngestReport":
    """Ingest ``source`` (a path, a read step or documents in memory) into the index folder ``index``; the report.
    ``call`` names the caller in a misspelt keyword's error (``ingest()``, ``Index.add()``)."""
    from flows.ingestion import ingest as run_ingestion
    from flows.ingestion.errors import NothingIngestedError, SettingsMismatchError
    from flows.ingestion.first_ingest import resume_in_python
    from flows.model_check import MissingModelsError
    from flows.train import train_command

    known = set(inspect.signature(run_ingestion).parameters) - {"source", "index"}  # its own spec, executor, ...
    check_keywords(call, options, known)  # Python's own TypeError names the typo only: say which was meant
    if source is None and spec == "ingest" and not options.get("retry_failed"):
        # the built-in spec's own path is the bundled sample: ingest(None, ...) ingested it, where data/ was there
        from flows.ingestion.errors import IngestError

        raise IngestError("source is None: give the file, glob or folder to ingest (None is for a spec= whose read "
                          "step names its own source, or retry_failed=True)", field="source")
    source = materialized(source)
    # what an empty run's warning names: not the temporary file that documents in memory are written to
    empty = ("every document given was skipped (said above)" if in_memory(source) else f"source={str(source)!r} "
             "holds no documents (an empty file, a header line alone, PDF pages without a text layer?)")
    read = documents_file(source, options.get("fields")) if in_memory(source) else contextlib.nullcontext(source)
    try:
        with read as source:
            report = run_ingestion(source, index, spec=spec, executor=executor, progress=progress, **options)
    except MissingModelsError as err:  # with the tessera train command that makes each, as Flow.run says
        raise err.made_by(train_command) from None
    except SettingsMismatchError as err:  # the call that resumes, not the tessera command
        raise resume_in_python(err) from None
    if report.nothing_ingested:  # as tessera ingest exits 1: an empty Index returned read as a success
        raise NothingIngestedError(report)
    if report.shards_total == 0 and not options.get("retry_failed"):  # as tessera ingest warns: an empty Index
        logging.getLogger("tessera.ingest").warning("%s: nothing was ingested into %s", empty, report.index)
    if progress and report.nothing_to_do and not options.get("retry_failed"):  # as tessera ingest says it
        from flows.ingestion.report import NOTHING_TO_DO

        print(f"{report.index}: {NOTHING_TO_DO}", file=sys.stderr, flush=True)
    return report
