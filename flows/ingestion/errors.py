"""Errors of the ingestion flow; each names what went wrong and what to do."""

from __future__ import annotations

from operators.errors import TesseraError


class IngestError(TesseraError):
    """Ingestion cannot go on (bad arguments, an index that does not match, a broken invariant)."""


def read_staging_json(path) -> dict | None:
    """A staging file of a source (``state.json``, ``job.json``), or None when there is none; one that cannot be
    read (damaged, cut short) is an ``IngestError`` naming it and saying to delete it: the next run reads the source
    again and finds its finished shards in the manifest (nothing is ingested twice)."""
    import json

    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:  # (UnicodeDecodeError is a ValueError)
        data = err
    if isinstance(data, dict):
        return data
    raise IngestError(f"{path} cannot be read ({data if isinstance(data, Exception) else 'not a JSON object'}): "
                      f"the source's staging state is damaged; delete {path.name} there and run the same command "
                      "again, with the --shard-size of its first run if it had one (the state recorded it): the "
                      "source is read again, and its shards the index finished are found, not ingested twice",
                      field="index")


class NothingIngestedError(IngestError):
    """Every document of the run failed (read, chunk or embed), so the index holds none of them: ``flows.api.ingest``
    raises it where ``tessera ingest`` exits 1, saying the same (its ``retry``: how to retry in the caller's words).
    ``report`` is the run's ``IngestReport``."""

    def __init__(self, report, retry: str | None = None, again: str | None = None):
        from flows.ingestion.ledger import first_open_failure

        self.report = report
        first = first_open_failure(report.index)
        retry = retry or f"fix them, then: ingest(None, {report.index!r}, retry_failed=True)"
        from operators.sources._documents import TEXT_FIELD_ADVICE

        if first and TEXT_FIELD_ADVICE in first:  # a retry reads the file with the same fields: it failed the same
            retry = f"{retry}, or read the source with other fields: {again or 'the same ingest(..., fields=...)'}"
        super().__init__(f"no document was ingested: all {report.failures} failed ("
                         + (f"the first: {first}; " if first else "") + f"why: {report.index}/failures.jsonl; {retry})",
                         field="source")


class SourceChangedError(IngestError):
    """A finished shard's documents differ from what the source yields now."""


class SettingsMismatchError(IngestError):
    """The existing index was built with other settings than this run asks for."""


class ShardAlignmentError(IngestError):
    """A stage got part of a shard: rows of one shard must travel together."""


class InjectedFault(IngestError):
    """A failure made on purpose by a ``TESSERA_FAULT`` hook (tests only)."""


#: What to do about a source whose ingested documents changed.
FOLLOW_ADVICE = ("ingest it with sync=True to make the index follow it, restore the source, or ingest it into a new "
                 "index")
