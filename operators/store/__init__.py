"""The on-disk index shared by ingestion and retrieval (not an operator category).

An index is a directory: ``manifest.json`` (settings, committed shards with file
checksums, tombstones, generation), ``shards/<id>/`` (docs.parquet, BM25 term
statistics, dense.faiss) and the ingestion's ``failures.jsonl``. See ``index.py``.
"""

from operators.store.errors import (CommitError, DocnoNotFoundError, IndexCorruptError, IndexExistsError,
                                    IndexNotFoundError, IndexStoreError, ShardDataError)
from operators.store.index import Hits, Index, resolve_index
from operators.store.settings import DenseInfo, IndexSettings, Manifest, ShardInfo

__all__ = [
    "CommitError", "DenseInfo", "DocnoNotFoundError", "Hits", "Index", "IndexCorruptError", "IndexExistsError",
    "IndexNotFoundError", "IndexSettings", "IndexStoreError", "Manifest", "ShardDataError", "ShardInfo",
    "resolve_index",
]
