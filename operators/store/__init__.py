"""The on-disk index shared by ingestion and retrieval (not an operator category).

An index is a directory: ``manifest.json`` (settings, committed shards with file
checksums, tombstones, generation), ``shards/<id>/`` (docs.parquet, BM25 term
statistics, dense.faiss) and the ingestion's ``failures.jsonl``. One module per concern:

* ``index``: ``Index``, creating, writing and committing shards, and searching them;
* ``search``: a search over one generation's shards, and the doc-store rows of its hits;
* ``commits``: what a commit changes (``Commit``), and shard folders no commit recorded;
* ``commit_shards``: which written shards a commit records, decided under the lock;
* ``layout``: the directory's parts, its writer lock, reading and replacing the manifest;
* ``snapshot``: one generation as searches see it, and the exact merge of shard hits;
* ``shard``, ``bm25``, ``dense``: one shard's files, its BM25 statistics, its FAISS index;
* ``settings``, ``errors``; ``token_store``: precomputed ColBERT document tokens;
* ``listing``: what an index holds, by document (``tessera index documents``).
"""

from operators.store.commits import Commit
from operators.store.errors import (CommitError, DocnoNotFoundError, IndexCorruptError, IndexExistsError,
                                    IndexNotFoundError, IndexStoreError, ShardDataError)
from operators.store.index import Index
from operators.store.layout import resolve_index
from operators.store.settings import DenseInfo, IndexSettings, Manifest, ShardInfo
from operators.store.snapshot import Hits

__all__ = [
    "Commit", "CommitError", "DenseInfo", "DocnoNotFoundError", "Hits", "Index", "IndexCorruptError",
    "IndexExistsError", "IndexNotFoundError", "IndexSettings", "IndexStoreError", "Manifest", "ShardDataError",
    "ShardInfo", "resolve_index",
]
