"""Where an ingestion stages a source, and the names of what it stages: the source's key (a hash of its read step's
params, paths made absolute), its staging folder under the index, and each shard's documents and failures files.

Why apart from ``staging``: the driver's ``Stager`` writes these files, but ``moved``, ``pending``, ``refused``,
``reuse`` and the Ray workers (``ShardJob.staged``, which have no ``Stager``) find and read them too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flows.ingestion.ledger import Failure
from operators.base import Source
from operators.store.upgrade import STAGING_DIR

#: Params that change how a source is read, not which documents it yields (``moved`` too compares sources without).
READ_ONLY_PARAMS = ("num_splits", "batch_rows", "on_error", "limit")
#: Sources keyed as another that reads the same params the same way: ``sources.files`` reads a PDF as ``sources.pdf``
#: does, and ``tessera ingest`` reads a folder of PDFs with ``sources.pdf`` until a text file is added to it
#: (``plan._folder_read``); keyed alike, the folder's PDFs stay its finished shards and the new file is appended.
_SAME_KEY = {"sources.files": "sources.pdf"}


def keyed_as(source: str) -> str:
    """The source name a staging key is made from (``_SAME_KEY``)."""
    return _SAME_KEY.get(source, source)


def source_params(op: Source) -> dict[str, Any]:
    """The read step's params, paths made absolute (a key, and ``moved``'s match, must not depend on the cwd)."""
    params = op.params.model_dump(mode="json")
    if params.get("encoding", "") is None:  # added later: unset, it keys a source as before (its staged shards)
        del params["encoding"]
    for name in ("path", "folder"):
        if isinstance(params.get(name), str) and "://" not in params[name]:
            params[name] = os.path.abspath(os.path.expanduser(params[name]))
    return params


def source_key(op: Source) -> str:
    return params_key(op.name, source_params(op))


def params_key(source: str, params: dict[str, Any]) -> str:
    """The staging key of the source ``source`` read with ``params`` (``source_params``)."""
    params = {k: v for k, v in params.items() if k not in READ_ONLY_PARAMS}
    payload = json.dumps({"op": keyed_as(source), "params": params}, sort_keys=True)
    return hashlib.sha1(payload.encode()).hexdigest()[:8]


def staging_dir(op: Source, index_path: str | Path, key: str | None = None) -> Path:
    """Where an ingestion of the source ``op`` into ``index_path`` stages its shards until they are committed
    (under ``key`` when given: a moved source's earlier key)."""
    return Path(index_path) / STAGING_DIR / (key or source_key(op))


def docs_file(folder: Path, shard: str) -> Path:
    return folder / f"{shard}.parquet"


def failures_file(folder: Path, shard: str) -> Path:
    return folder / f"{shard}.failures.json"


def read_staged(folder: str | Path, shard: str) -> tuple[pa.Table, list[Failure]]:
    """A shard staged in ``folder``: its documents and its unreadable records. The driver (``Stager.load``) and the
    Ray workers (``ShardJob.staged``, which have no ``Stager``) both read it here. ``FileNotFoundError`` when its
    documents are gone (the run that finished it deleted them)."""
    folder = Path(folder)
    docs = pq.read_table(docs_file(folder, shard))
    path = failures_file(folder, shard)
    failures = [Failure.from_dict(d) for d in json.loads(path.read_text(encoding="utf-8"))] if path.exists() else []
    return docs, failures


def staged_ids(path: Path) -> list[str]:
    """The ids of a staged shard file's documents, in order; ``FileNotFoundError`` when it is gone (the run that
    finished the shard deleted it)."""
    return [str(d) for d in pq.read_table(path, columns=["docno"]).column("docno").to_pylist()]
