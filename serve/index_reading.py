"""Reading an index the service holds (``serve.indices``): its size for the listing, its live ids, and a read that
meets an index deleted meanwhile, which is a 404 rather than the 500 of a damaged index."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

from serve.errors import ApiError

#: How many ids a ``documents_exist`` refusal names in its message, and lists in its body.
SHOWN_IDS, LISTED_IDS = 10, 1000


@contextlib.contextmanager
def deleted_meanwhile(path: Path, name: str, field: str = "name") -> Iterator[None]:
    """Reading or changing the index at ``path``: when it fails (a shard file, the lock, the manifest not found) and
    the index has no manifest any more, it was deleted meanwhile (``DELETE /v1/indices/{name}`` moves the folder
    aside at once), and that is a 404 naming it, not the 500 of a damaged index."""
    from operators.store.errors import IndexStoreError

    try:
        yield
    except (IndexStoreError, OSError):
        if not was_deleted(path):
            raise
        raise ApiError(404, f"no index named '{name}': it was deleted while this request read it", param=field,
                       code="index_not_found") from None


def was_deleted(path: Path) -> bool:
    """Whether the index at ``path``, which a read just failed on, is gone rather than damaged: a delete moves the
    whole folder aside at once, so a missing manifest means deleted, while a present one means the failure is real."""
    return not (path / "manifest.json").exists()


#: What ``listing`` says of an index that has no documents yet.
EMPTY = {"chunks": 0, "shards": 0, "bm25": None, "dense": None, "encoder": None}


def open_index(path: Path) -> Any:
    """The index at ``path``, or None when it has none (its first ingestion has not committed, or it was deleted)."""
    from operators.store import Index, IndexNotFoundError

    try:
        return Index.open(path, verify=False)
    except IndexNotFoundError:
        return None


def describe(path: Path) -> dict[str, Any] | None:
    """Size and settings of the index at ``path``; None when there is none (or it cannot be read)."""
    from operators.store import Index
    from operators.store.errors import IndexStoreError

    try:
        index = Index.open(path, verify=False)
    except (IndexStoreError, OSError):
        return None
    settings, counts = index.settings, index.counts()
    return {"chunks": counts["live_chunks"], "shards": counts["shards"], "bm25": settings.bm25,
            "dense": settings.dense, "encoder": settings.encoder if settings.dense else None}


def live_doc_ids(index: Any) -> set[str]:
    """The ids of the documents that have a live passage in ``index``."""
    _, live = index.columns(["doc_id"])
    return set(live.column("doc_id").cast("string").to_pylist())


def refuse_present_ids(path: Path, ids: list[str]) -> None:
    """409 when any of ``ids`` is a document of the index already (replacing is a delete, then an add); its body
    lists them in ``ids`` (the first ``LISTED_IDS``) and counts them in ``ids_total``, for a client to act on."""
    from operators.store import Index
    from operators.store.errors import IndexStoreError

    try:
        present = live_doc_ids(Index.open(path, verify=False))
    except (IndexStoreError, OSError):
        if not was_deleted(path):
            raise
        return  # deleted since it was found: the upload makes the index anew, so none of its ids is in it
    taken = [i for i in ids if i in present]
    if taken:
        shown = ", ".join(f"'{i}'" for i in taken[:SHOWN_IDS]) + (" ..." if len(taken) > SHOWN_IDS else "")
        raise ApiError(409, f"{len(taken)} document id(s) are in the index already: {shown}; send them with "
                       "replace: true to replace them", param="documents", code="documents_exist",
                       extra={"ids": taken[:LISTED_IDS], "ids_total": len(taken)})
