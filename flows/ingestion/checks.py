"""Everything an ingestion checks before it creates anything: the options, the source, the settings, the models.

Apart from ``job`` so that a service can refuse a request (``check_ingest``) without the run's machinery.
"""

from __future__ import annotations

import glob
import logging
import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal

from flows.ingestion.errors import IngestError
from flows.ingestion.plan import (ANY_SOURCE, DEFAULT_SPEC, IngestPlan, build_plan, embed_params, fit_dim,
                                  index_settings, require_models)
from flows.ingestion.reading import check_source
from flows.ingestion.staging import DEFAULT_SHARD_SIZE  # noqa: F401 - this module's name too
from operators.errors import SourceNotFoundError, short_repr
from operators.path_access import windows_path

log = logging.getLogger("tessera.ingest")



def _warn_kept_settings(index_path: Path, existing, asked: dict[str, Any], given: Any) -> None:
    """An existing index keeps its settings: say so when a spec the caller named (not the default one, which asks
    for nothing: documents added to a BM25-only index) has index_settings that ask for others (``dense``, the
    ``encoder``, a ``stemmer`` or ``stopwords`` for the corpus's language; those the caller's own settings do not
    set), instead of ingesting silently without them."""
    given = given if isinstance(given, dict) else {}
    diff = {k: (getattr(existing, k, None), asked[k]) for k in asked
            if k not in given and getattr(existing, k, None) != asked[k]}
    if not (existing.dense and asked.get("dense", True)):
        for key in ("encoder", "dim", "dense_type", "dense_options"):  # no vectors on one side: they do not matter
            diff.pop(key, None)
    if diff:
        log.warning("the index %s keeps the settings it was created with: the spec's index_settings ask for "
                    "%s, the index has %s; ingest into a new index to get them", index_path,
                    ", ".join(f"{k}={v[1]!r}" for k, v in diff.items()),
                    ", ".join(f"{k}={v[0]!r}" for k, v in diff.items()))


def _no_source(spec: str | Path | dict | None, plan: IngestPlan, err: SourceNotFoundError) -> Exception:
    """With no source, the read step's own path (``data/sample/corpus.jsonl`` in the built-in spec, relative to
    the working directory) is not there: an error that says so, rather than naming a file the caller never gave;
    ``err`` itself when the path is there (a folder without the files it reads)."""
    value = getattr(plan.read.params, (err.field or "").removeprefix("params."), None)
    if not isinstance(value, str) or Path(value).expanduser().exists():
        return err
    name = spec.get("name") if isinstance(spec, dict) else str(spec)
    sample = "sample " if spec == DEFAULT_SPEC else ""
    where = "" if Path(value).expanduser().is_absolute() else f", relative to the working directory {os.getcwd()}"
    missing = "matches no file" if glob.has_magic(value) else "does not exist"
    reads = f"no source= was given, so the spec{f' {name!r}' if name else ''} reads its own {sample}path {value}"
    if (windows := windows_path(value)) is not None:  # not relative to here: written on another machine
        return IngestError(f"{reads}, {windows} (in the spec), or give source=FILE", field="source")
    return IngestError(f"{reads}{where}, which {missing} here; give source=FILE", field="source")


@dataclass(frozen=True)
class CheckedIngest:
    """What ``check_ingest`` resolved: the index folder, the plan, the full settings and the embed params."""

    index_path: Path
    plan: IngestPlan
    settings: Any
    embed: dict[str, Any] | None


def _check_sync(sync: bool, *, replace: bool, retry_failed: bool, source: Any) -> None:
    """``sync`` with ``retry_failed`` retries the failures whose files are there and closes those whose files are
    gone (``flows.ingestion.retry``), whatever source they came from: it takes no source."""
    if sync and replace:
        raise IngestError("sync=True makes the index's copy of the source follow it, replace=True ingests the source "
                          "again as one of its own, replacing documents with the same ids: choose one", field="sync")
    if sync and retry_failed and isinstance(source, (str, os.PathLike)):
        raise IngestError("a retry with sync=True retries the index's open failures and closes those of files no "
                          "longer there, whatever source they came from; to make the index follow a changed source, "
                          "ingest it with sync=True and without retry_failed=True", field="sync")


def check_ingest(source: str | Path | dict | None, index: str | Path, *, settings: Any = None,
                 shard_size: int | None = None, executor: str = "ray",
                 chunk: dict[str, Any] | Literal[False] | None = None, spec: str | Path | dict | None = None,
                 retry_failed: bool = False, colbert: str | None = None,
                 encoding: str | None = None, fields: dict[str, str] | None = None, replace: bool = False,
                 sync: bool = False) -> CheckedIngest:
    """Everything ``ingest`` checks before it creates anything (an ``IngestError`` naming the field); creates
    nothing, so a service can refuse a request before it queues the work."""
    from operators.store import Index, IndexStoreError, resolve_index
    from operators.store.layout import check_new_index_path, check_not_foreign

    if executor not in ("ray", "local"):
        raise IngestError(f"executor must be 'ray' or 'local', got {executor!r}", field="executor")
    if shard_size is not None and (isinstance(shard_size, bool) or not isinstance(shard_size, numbers.Integral)):
        raise IngestError(f"shard_size must be a whole number, got {type(shard_size).__name__} "
                          f"{short_repr(shard_size)}", field="shard_size")
    if source is not None and not isinstance(source, (str, os.PathLike, dict)):
        raise IngestError(f"source must be a file, a glob or a folder (str or pathlib.Path), or a read step "
                          f"{{'op': ..., 'params': ...}}; got {type(source).__name__} {short_repr(source)}",
                          field="source")
    if chunk is True:  # "yes, chunk": the spec's chunk step, as None is
        chunk = None
    if chunk is not None and chunk is not False and not isinstance(chunk, dict):  # dict(True): a bare TypeError
        raise IngestError(f"chunk is the chunker's params ({{'size': 200, 'unit': 'tokens'}}), False for none, or None "
                          f"(or True) for the spec's chunk step; got {type(chunk).__name__} {short_repr(chunk)}",
                          field="chunk")
    if shard_size is not None and shard_size < 1:
        raise IngestError(f"shard_size must be at least 1, got {shard_size}", field="shard_size")
    try:  # an empty name, ~nosuchuser; a file (a corpus, most likely), bench's folder, a lost manifest
        index_path = resolve_index(index)
        check_new_index_path(index_path)  # before anything is staged
        check_not_foreign(index_path)  # the index would be written among someone's files
    except IndexStoreError as err:
        raise IngestError(err.message, field="index") from None
    exists = (index_path / "manifest.json").exists()
    _check_sync(sync, replace=replace, retry_failed=retry_failed, source=source)
    if retry_failed:
        if not exists:
            raise IngestError(f"no index at {index_path} to retry failures of", field="index")
        if isinstance(source, (str, os.PathLike)):  # it was ignored without a word: every open failure is retried
            raise IngestError("a retry processes the index's open failures (failures.jsonl), whatever source they "
                              "came from, and reads no source of its own: leave source out", field="source")
        if encoding is not None:
            raise IngestError("a retry reads its failures as their source was read, in its encoding; to read a "
                              "source in another one, ingest it with encoding= (and replace=True)", field="encoding")
        if fields:
            name = next(iter(fields))
            raise IngestError("a retry reads its failures as their source was read, with its fields; to read the "
                              "source with other fields, ingest it again with them and without retry_failed=True "
                              "(with replace=True where its documents are in the index already)", field=name)
        plan = build_plan(spec, source if source is not None else ANY_SOURCE, chunk)
    else:
        plan = build_plan(spec, source, chunk, encoding=encoding, fields=fields)
        try:
            check_source(plan.read)
        except SourceNotFoundError as err:
            if source is None:  # the spec's own path, which the caller never named
                raise _no_source(spec, plan, err) from None
            # a glob of no file, as tessera ingest says it: the read step's error named a param never given
            if isinstance(source, (str, os.PathLike)) and glob.has_magic(str(source)):
                raise IngestError(f"cannot read source='{source}': no file matches it (working directory "
                                  f"{os.getcwd()})", field="source") from None
            raise
    _check_extras(plan)
    full_settings = index_settings(index_path, settings, plan.settings_base)
    if exists and not retry_failed and spec not in (None, DEFAULT_SPEC):  # a retry adds to the index it retries;
        _warn_kept_settings(index_path, full_settings, plan.settings_base, settings)
    embed = embed_params(plan, full_settings, existing=index_path if exists else None)
    require_models(None if plan.embed_placement else embed, colbert)  # a placed encoder is the deployment's
    existing = Index.open(index_path, verify=False) if exists else None
    if existing is not None and embed is not None and not plan.embed_placement:
        _refuse_other_weights(existing)
    if existing is not None and existing.finished_shards():
        # The encoder the index names wrote its shards' vectors at its dim, so the model is not loaded to ask it (10 s
        # and more, for a run that may embed nothing: every shard done, or refused); a model changed since under the
        # same name is refused by the first shard's write.
        return CheckedIngest(index_path, plan, full_settings, embed)
    given = (not isinstance(settings, dict) and settings is not None) or exists \
        or "dim" in (settings or {}) or "dim" in plan.settings_base
    return CheckedIngest(index_path, plan, fit_dim(full_settings, embed, given, plan.embed_placement), embed)


def _refuse_other_weights(index) -> None:
    """Documents added to an index made with other weights of its encoder (retrained since under the same name)
    would be embedded in another space than its vectors: refused, naming both fingerprints."""
    from operators.store.index import other_encoder_weights

    other = other_encoder_weights(index)
    if other is not None:
        made, now = other
        raise IngestError(f"the index {index.path} was embedded by other weights of encoder '{index.settings.encoder}' "
                          f"({made}, here {now}: retrained since, or another copy): documents added now would not "
                          "compare with its vectors; ingest into a new index", field="index")


def _check_extras(plan: IngestPlan) -> None:
    """An ``IngestError`` naming the first step whose optional package is not installed: it failed each document,
    and the ingestion exited 0 with the reason only in the failure ledger."""
    from operators.extras import missing_extra
    from operators.registry import get_operator

    for step, op in [("read", plan.read), *((each["step"], get_operator(each["op"])) for each in plan.enrich)]:
        if (why := missing_extra(op)) is not None:
            raise IngestError(f"step '{step}': {why}", field="spec")


def doc_ids_to_delete(value: Any) -> frozenset[str]:
    """``delete_doc_ids`` as a set of ids: a text given alone was read a character at a time (it deleted the
    documents "1" and "2" for "12"), so anything but a collection of texts is an ``IngestError`` naming it."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise IngestError(f"delete_doc_ids takes a list of document ids, not {type(value).__name__} "
                          f"{short_repr(value)}", field="delete_doc_ids")
    ids = list(value)
    if (bad := next((v for v in ids if not isinstance(v, str)), None)) is not None:
        raise IngestError(f"delete_doc_ids holds {type(bad).__name__} {short_repr(bad)}: a document id is a text",
                          field="delete_doc_ids")
    return frozenset(ids)


def warn_damaged(index: Any) -> None:
    """Warn of an index's shards with a file missing (a stat of each, ``Index.check``): an ingestion whose source is
    all done says "already done", and running it again mends no finished shard."""
    if index is None or not (damaged := index.check(checksums=False)):
        return
    from operators.store.shard import damaged_error

    log.warning("%s; ingesting again does not mend a finished shard: restore its files, or ingest into a new index "
                "(tessera index info checks every file)", damaged_error(index.path, damaged).message)
