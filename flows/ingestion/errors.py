"""Errors of the ingestion flow; each names what went wrong and what to do."""

from __future__ import annotations

from operators.errors import TesseraError


class IngestError(TesseraError):
    """Ingestion cannot go on (bad arguments, an index that does not match, a broken invariant)."""


class SourceChangedError(IngestError):
    """A finished shard's documents differ from what the source yields now."""


class SettingsMismatchError(IngestError):
    """The existing index was built with other settings than this run asks for."""


class ShardAlignmentError(IngestError):
    """A stage got part of a shard: rows of one shard must travel together."""


class InjectedFault(IngestError):
    """A failure made on purpose by a ``TESSERA_FAULT`` hook (tests only)."""
