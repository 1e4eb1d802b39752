"""``Index.add``, ``update`` and ``delete`` of the Python API: documents (in memory or a file) ingested into an index
that exists, and documents deleted from it, each refusal naming what to call instead.

Why a module of its own: ``flows.api.flow_and_index`` holds ``Index`` and ``Flow``, near the bound on a module's
lines; these are the index's changes, beside its search.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from operators.errors import short_repr

if TYPE_CHECKING:
    from flows.ingestion import IngestReport
    from operators.store import Index as StoreIndex


def add(store: "StoreIndex", documents: Any, options: dict[str, Any]) -> "IngestReport":
    """``Index.add``. Documents in memory are added now, whatever was staged before: ids the index holds are refused
    before anything is embedded, and the rest ingested as a source of their own (``replace=True`` replaces none), so
    documents added, deleted and added again come back (``ingest`` resumed them: nothing to do). A file's ids the
    index holds fail its commit, with the same advice."""
    from flows.api.documents import checked_table, document_ids, in_memory, materialized
    from operators.store.errors import CommitError

    path, documents = Path(store.path), materialized(documents)
    if in_memory(documents) and not options.get("replace"):
        documents = checked_table(documents, options.get("fields"))
        ids = document_ids(documents, options.get("fields"))
        _refuse_repeated(ids)
        live = store.live_doc_ids()
        if clash := [doc_id for doc_id in ids if doc_id in live]:
            raise CommitError(f"document(s) {clash[:5]} ({len(clash)} in all) are already live in {path}; nothing "
                              "was embedded or written", advice=_UPDATE, field="doc_id")
        options = {**options, "replace": True}
    try:
        return ingested(path, documents, "Index.add()", options)
    except CommitError as err:  # its advice named tessera ingest --replace and replace=True
        if "already live" not in err.detail or options.get("replace"):
            raise
        raise CommitError(err.detail, advice=_UPDATE, field=err.field) from None


def _refuse_repeated(ids: list[str]) -> None:
    """Documents given twice under one id, refused before anything is embedded, as ``tessera index add`` refuses
    them: ``add`` ingests documents in memory with ``replace=True`` (so that documents deleted come back), which kept
    the last copy without a word, where ``ingest`` keeps the first and records the others as failures."""
    from collections import Counter

    from flows.ingestion.errors import IngestError

    if not (repeated := [doc_id for doc_id, n in Counter(ids).items() if n > 1]):
        return
    shown = ", ".join(repr(doc_id) for doc_id in repeated[:5]) + (", ..." if len(repeated) > 5 else "")
    raise IngestError(f"the documents given repeat {len(repeated)} id(s) ({shown}): ids must be unique among the "
                      "documents added; nothing was embedded or written (index.update(documents) keeps the last copy "
                      "of each)", field="source")


#: What ``add`` says to do with ids the index holds.
_UPDATE = "give the documents other ids, or replace the index's copies: index.update(documents)"


def ingested(path: Path, documents: Any, call: str, options: dict[str, Any]) -> "IngestReport":
    """``ingest(documents, path, **options)``'s report, with ``ingest``'s defaults, the documents cut into passages
    as the index's were (``job_params.index_chunking``: whole where they were not) unless ``chunk`` or ``spec`` says
    otherwise; ``call`` names the caller in a misspelt keyword's error."""
    from flows.api.ingesting import ingested as run
    from flows.ingestion.job_params import index_chunking

    if "chunk" not in options and "spec" not in options:  # the built-in spec's chunker cut a --no-chunk index's adds
        options = {**options, "chunk": index_chunking(path) or False}
    options = {"spec": "ingest", "executor": "local", "progress": True, **options}
    return run(documents, path, call=call, **options)


def delete(store: "StoreIndex", doc_ids: Iterable[str]) -> int:
    """``Index.delete``: every passage of ``doc_ids``; an id the index lacks is refused, and nothing deleted."""
    from operators.store.errors import CommitError, listed_ids, passage_hint

    if not isinstance(doc_ids, Iterable):  # a number: "'int' object is not iterable" from inside
        raise CommitError(f"doc_ids is a list of document ids; got {type(doc_ids).__name__} {short_repr(doc_ids)}",
                          field="doc_ids")
    wanted = list(dict.fromkeys(str(i) for i in listed_ids(doc_ids, "doc_ids")))
    live = store.live_doc_ids()
    if unknown := [doc_id for doc_id in wanted if doc_id not in live]:
        docno = passage_hint(unknown, live)
        raise CommitError(f"{Path(store.path).name} holds no document {', '.join(map(repr, unknown[:5]))}"
                          f"{f' ({len(unknown)} in all)' if len(unknown) > 5 else ''}, so nothing was deleted{docno}",
                          field="doc_ids")
    return store.delete(doc_ids=wanted)
