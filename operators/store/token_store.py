"""Precomputed ColBERT document tokens of an index: docno -> [n_tokens, dim] float16, memory-mapped.

Reranking 100 candidates with ColBERT on the fly runs the transformer over 100
documents per query; with their token vectors computed once at ingestion
(``tessera ingest --colbert MODEL`` or ``build_token_store``), a query costs one
short query encoding and a matrix product. A store lives inside the index folder::

    colbert/<key>/tokens.f16      every document's token vectors, one after the other
                                  (raw little-endian float16, [n_tokens, dim])
              /offsets.npy        int64 [n_docs + 1]: document i is tokens[offsets[i]:offsets[i + 1]]
              /docs.parquet       docno, shard, row of document i (where it came from in the index),
                                  and digest: of the text its tokens were encoded from
              /meta.json          model identity, dim, doc_maxlen, text recipe, counts

``<key>`` is a digest of everything that decides the vectors (the model's weights
and settings, ``doc_maxlen``, the text and title columns), so a reranker finds the
store made for it or none. The tokens are raw rather than ``.npy`` because they are
streamed to disk while encoding, before their total is known. A store is written into
a temporary folder and renamed: readers see a whole store or none. Entries whose
shard row was since deleted or replaced (an upsert keeps the docno, not the text) are
ignored, so a stale store is never wrong, only partial; building again reuses every
entry that is still valid and encodes the rest. A reranker that passes the candidates'
texts gets None for an entry encoded from another text (a step before it rewrote the
row's text: stemmed it, cut it), so it scores the text in the row, not the one indexed.
A store written before digests were kept is taken as it is, and building it again adds
them without encoding anything.

Usage::

    build_token_store("scifact", "tessera-colbert")
    store = find_token_store("scifact", load_colbert("tessera-colbert"), doc_maxlen=180)
    store.get(["d1", "d2"])  # [array float16 [n, 128], None (not stored)]
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from operators.atomic import fsync, replace_folder
from operators.models.batching import forward_batch_size
from operators.stale_writes import WriterLock, remove_abandoned_in
from operators.store.errors import IndexStoreError
from operators.store.layout import SHARDS, resolve_index
from operators.store.shard import TMP_PREFIX
from operators.tables import document_text

STORE_DIR = "colbert"
TOKENS, OFFSETS, DOCS, META = "tokens.f16", "offsets.npy", "docs.parquet", "meta.json"
FORMAT = "tessera-colbert-tokens/1"
DTYPE = np.dtype("<f2")


class TokenStoreError(IndexStoreError):
    """A token store that is missing, incomplete, or made for another model."""


def text_digest(text: str) -> int:
    """A 64-bit digest of the text a document's tokens were encoded from (``tables.document_text``)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little",
                          signed=True)


def store_key(model: Any, *, doc_maxlen: int, text_column: str = "text", title_column: str | None = "title") -> str:
    """The folder name of ``model``'s store for this document encoding (see the module docstring)."""
    recipe = {"model": model.identity(), "doc_maxlen": int(doc_maxlen), "text_column": text_column,
              "title_column": title_column}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


class TokenStore:
    """A finished store, opened read-only; ``get`` returns memory-mapped float16 matrices."""

    def __init__(self, folder: str | os.PathLike, *, index: Any = None) -> None:
        self.folder = Path(folder)
        meta_file = self.folder / META
        if not meta_file.is_file():
            raise TokenStoreError(f"no ColBERT token store at {self.folder} ({META} not found)")
        try:
            self.meta = json.loads(meta_file.read_text(encoding="utf-8"))
            self.offsets = np.load(self.folder / OFFSETS)
            docs = pq.read_table(self.folder / DOCS)
        except (OSError, ValueError, pa.ArrowInvalid) as err:
            raise TokenStoreError(f"unreadable ColBERT token store {self.folder}: {err}") from None
        found = self.meta.get("format", FORMAT) if isinstance(self.meta, dict) else None
        if found != FORMAT:  # a later Tessera's layout: read as this one's, its tokens would score wrongly
            raise TokenStoreError(f"ColBERT token store {self.folder} has format {found!r}, which a later Tessera "
                                  f"wrote (this one reads {FORMAT!r}): run that Tessera, or build the store again "
                                  "with this one (tessera ingest --index INDEX --colbert MODEL)")
        self.dim = int(self.meta["dim"])
        n_tokens = int(self.offsets[-1]) if len(self.offsets) else 0
        expected = n_tokens * self.dim * DTYPE.itemsize
        size = (self.folder / TOKENS).stat().st_size if (self.folder / TOKENS).exists() else -1
        if size != expected or len(self.offsets) != docs.num_rows + 1:
            raise TokenStoreError(f"ColBERT token store {self.folder} is incomplete: {TOKENS} has {size} bytes for "
                                  f"{n_tokens} tokens of dim {self.dim}, {docs.num_rows} docs for "
                                  f"{len(self.offsets) - 1} offsets")
        self.tokens = (np.memmap(self.folder / TOKENS, dtype=DTYPE, mode="r", shape=(n_tokens, self.dim))
                       if n_tokens else np.zeros((0, self.dim), DTYPE))
        self.docnos = docs.column("docno").to_pylist()
        self.shards = docs.column("shard").to_pylist()
        self.rows = docs.column("row").to_numpy()
        #: Per entry, the digest of its text; None for a store written before they were kept (or without texts).
        self.digests = docs.column("digest").to_pylist() if "digest" in docs.column_names else None
        self.index = index
        self._generation: int | None = None
        self._lookup: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.docnos)

    def __repr__(self) -> str:
        return f"TokenStore({str(self.folder)!r}, docs={len(self)}, tokens={len(self.tokens)}, dim={self.dim})"

    def _valid_rows(self) -> dict[str, int]:
        """docno -> store row, for entries whose index row is still live (all entries without an index)."""
        if self.index is None:
            if not self._lookup and self.docnos:
                self._lookup = {d: i for i, d in enumerate(self.docnos)}
            return self._lookup
        manifest = self.index.manifest  # re-read when another process committed
        if manifest.generation != self._generation:
            tokens = {s.id: s.token for s in manifest.shards}
            dead = {k: set(v) for k, v in manifest.tombstones.items()}
            built = self.meta.get("shard_tokens", {})
            live = {s for s, t in built.items() if tokens.get(s) == t}
            self._lookup = {d: i for i, (d, s, r) in enumerate(zip(self.docnos, self.shards, self.rows.tolist()))
                            if s in live and r not in dead.get(s, ())}
            self._generation = manifest.generation
        return self._lookup

    def get(self, docnos: Sequence[str], texts: Sequence[str] | None = None) -> list[np.ndarray | None]:
        """The [n_tokens, dim] float16 matrix of each docno; None where the store has no valid entry, or (given the
        ``texts`` to score) where its entry was encoded from another text."""
        lookup = self._valid_rows()
        out: list[np.ndarray | None] = []
        for n, docno in enumerate(docnos):
            i = lookup.get(docno)
            if i is not None and texts is not None and self.digests is not None:
                stored = self.digests[i]
                i = i if stored is None or stored == text_digest(texts[n]) else None
            out.append(None if i is None else self.tokens[self.offsets[i]:self.offsets[i + 1]])
        return out

    def entries(self) -> dict[tuple[str, str, int], int]:
        """(docno, shard, row) -> store row of every valid entry (reused when the store is built again)."""
        lookup = self._valid_rows()
        return {(d, self.shards[i], int(self.rows[i])): i for d, i in lookup.items()}


class _Writer:
    """Streams a store into a temporary folder; ``finish`` renames it into place."""

    def __init__(self, final: Path, dim: int) -> None:
        self.final, self.dim = final, dim
        final.parent.mkdir(parents=True, exist_ok=True)
        remove_abandoned_in(final.parent, TMP_PREFIX)  # the folders of builds killed outright (lock free)
        self.tmp = final.parent / f"{TMP_PREFIX}{final.name}-{uuid.uuid4().hex[:12]}"
        self.lock = WriterLock(self.tmp)  # held until finish or abort: a killed build's folder is told by it
        try:
            self.tmp.mkdir()
            self.file = open(self.tmp / TOKENS, "wb")
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.lock.release()
            raise
        self.offsets = [0]
        self.docnos: list[str] = []
        self.shards: list[str] = []
        self.rows: list[int] = []
        self.digests: list[int | None] = []

    def add(self, docno: str, matrix: np.ndarray, shard: str = "", row: int = -1, text: str | None = None) -> None:
        """One document's tokens; ``text``, the text they were encoded from, lets a reader tell a rewritten one."""
        matrix = np.asarray(matrix)
        if matrix.ndim != 2 or matrix.shape[1] != self.dim:
            raise TokenStoreError(f"document {docno!r}: token matrix must be [n, {self.dim}], got {matrix.shape}",
                                  field="tokens")
        self.file.write(np.ascontiguousarray(matrix, dtype=DTYPE).tobytes())
        self.offsets.append(self.offsets[-1] + matrix.shape[0])
        self.docnos.append(str(docno))
        self.shards.append(shard)
        self.rows.append(int(row))
        self.digests.append(None if text is None else text_digest(text))

    def finish(self, meta: dict[str, Any]) -> Path:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        np.save(self.tmp / OFFSETS, np.asarray(self.offsets, dtype=np.int64))
        pq.write_table(pa.table({"docno": pa.array(self.docnos, pa.string()),
                                 "shard": pa.array(self.shards, pa.string()),
                                 "row": pa.array(self.rows, pa.int64()),
                                 "digest": pa.array(self.digests, pa.int64())}), self.tmp / DOCS)
        meta = {**meta, "format": FORMAT, "dim": self.dim, "dtype": "float16", "n_docs": len(self.docnos),
                "n_tokens": self.offsets[-1], "created_at": time.time()}
        (self.tmp / META).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        for name in (OFFSETS, DOCS, META):
            fsync(self.tmp / name)
        replace_folder(self.tmp, self.final)  # a rebuild swaps the old store out
        self.lock.release()
        return self.final

    def abort(self) -> None:
        self.file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.lock.release()


def write_token_store(folder: str | os.PathLike, items: Iterable[tuple[str, np.ndarray]], *, dim: int,
                      meta: dict[str, Any] | None = None) -> TokenStore:
    """Write ``(docno, [n, dim] matrix)`` pairs as a store at ``folder`` (atomically; replaces one there)."""
    writer = _Writer(Path(folder), dim)
    try:
        for docno, matrix in items:
            writer.add(docno, matrix)
        writer.finish(dict(meta or {}))
    except BaseException:
        writer.abort()
        raise
    return TokenStore(folder)


# -- the store of an index ---------------------------------------------------------------------


def _open_index(index: Any):
    from operators.store.index import Index

    if isinstance(index, Index):
        return index
    try:
        return Index.open(index)
    except IndexStoreError as err:
        raise TokenStoreError(f"cannot open index {index!r}: {err.message}", field="index") from None


def _live_documents(index: Any, columns: list[str], batch_rows: int = 1024) -> Iterator[tuple[str, pa.Table]]:
    """(shard id, batch with a ``__row`` column) over every live chunk of ``index``, shard by shard."""
    from operators.store.shard import DOCS_FILE

    manifest = index.manifest
    for info in manifest.shards:
        dead = np.asarray(sorted(manifest.tombstones.get(info.id, [])), dtype=np.int64)
        parquet = pq.ParquetFile(index.path / SHARDS / info.id / DOCS_FILE)
        present = [c for c in columns if c in parquet.schema_arrow.names]
        start = 0
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=present):
            rows = np.arange(start, start + batch.num_rows, dtype=np.int64)
            start += batch.num_rows
            table = pa.Table.from_batches([batch]).append_column("__row", pa.array(rows))
            if len(dead):
                table = table.filter(pa.array(~np.isin(rows, dead)))
            if table.num_rows:
                yield info.id, table


def build_token_store(index: Any, model: str = "tessera-colbert", *, doc_maxlen: int | None = None,
                      text_column: str = "text", title_column: str | None = "title", batch_size: int | None = None,
                      device: str | None = None, progress: bool = False, rebuild: bool = False) -> TokenStore:
    """Encode every live chunk of ``index`` (a path, a name or an ``Index``) with the ColBERT ``model``.

    The text is the one ``rerank.colbert`` scores with the same ``text_column``/``title_column``.
    An existing store for the same key keeps its still-valid entries (only new or
    replaced chunks are encoded) unless ``rebuild``; it is replaced atomically.
    """
    from operators.models.colbert import load_colbert

    index = _open_index(index)
    encoder = load_colbert(model, device=device)
    maxlen = encoder.maxlen(query=False, maxlen=doc_maxlen)
    key = store_key(encoder, doc_maxlen=maxlen, text_column=text_column, title_column=title_column)
    folder = index.path / STORE_DIR / key
    manifest = index.manifest
    old = None
    if (folder / META).is_file() and not rebuild:
        try:
            old = TokenStore(folder, index=index)
        except TokenStoreError:
            old = None
        if old is not None and old.meta.get("index_generation") == manifest.generation and old.digests is not None:
            return old
    reuse = old.entries() if old is not None else {}
    total = manifest.counts()["live_chunks"]
    writer = _Writer(folder, encoder.dim)
    bar = _bar(total, progress)
    n_encoded = 0
    try:
        for shard, table in _live_documents(index, ["docno", text_column, *([title_column] if title_column else [])]):
            docnos = table.column("docno").cast(pa.string()).to_pylist()
            rows = table.column("__row").to_pylist()
            texts = table.column(text_column).to_pylist() if text_column in table.column_names \
                else [""] * table.num_rows
            titles = table.column(title_column).to_pylist() if title_column and title_column in table.column_names \
                else [None] * table.num_rows
            kept = [reuse.get((d, shard, r)) for d, r in zip(docnos, rows)]
            todo = [i for i, k in enumerate(kept) if k is None]
            batch = forward_batch_size(batch_size, encoder)
            if len(docnos) > len(todo):
                bar.update(len(docnos) - len(todo))  # reused: done at once; the others after each forward pass
            documents = [document_text(text, title) for text, title in zip(texts, titles)]
            encoded = dict(zip(todo, encoder.encode_documents([documents[i] for i in todo], batch_size=batch,
                                                              maxlen=maxlen, on_batch=bar.update))) if todo else {}
            n_encoded += len(todo)
            for i, (docno, row) in enumerate(zip(docnos, rows)):
                matrix = encoded[i] if kept[i] is None else old.tokens[old.offsets[kept[i]]:old.offsets[kept[i] + 1]]
                writer.add(docno, matrix, shard, row, text=documents[i])
        meta = {"key": key, "model": model, "model_path": str(getattr(encoder, "source_path", "")),
                "model_identity": encoder.identity(), "doc_maxlen": maxlen, "text_column": text_column,
                "title_column": title_column, "index_generation": manifest.generation,
                "shard_tokens": {s.id: s.token for s in manifest.shards}, "encoded": n_encoded,
                "reused": len(writer.docnos) - n_encoded}
        writer.finish(meta)
    except BaseException:
        writer.abort()
        raise
    finally:
        bar.close()
    return TokenStore(folder, index=index)


def find_token_store(index: Any, model: Any, *, doc_maxlen: int, text_column: str = "text",
                     title_column: str | None = "title") -> TokenStore | None:
    """The store of ``index`` made for ``model`` (a loaded ColBERT model) and this encoding; None if absent."""
    path = resolve_index(index) if not hasattr(index, "path") else index.path
    folder = path / STORE_DIR / store_key(model, doc_maxlen=doc_maxlen, text_column=text_column,
                                          title_column=title_column)
    if not (folder / META).is_file():
        return None
    return TokenStore(folder, index=_open_index(index))


def open_token_store(path: str | os.PathLike, model: Any, *, doc_maxlen: int, text_column: str = "text",
                     title_column: str | None = "title") -> TokenStore:
    """The store at ``path`` (a store folder, or an index folder holding one for ``model``), checked to be made
    for ``model`` and this encoding; raises TokenStoreError otherwise."""
    path = Path(path).expanduser()
    key = store_key(model, doc_maxlen=doc_maxlen, text_column=text_column, title_column=title_column)
    if (path / "manifest.json").is_file():
        store = find_token_store(path, model, doc_maxlen=doc_maxlen, text_column=text_column,
                                 title_column=title_column)
        if store is None:
            raise TokenStoreError(f"index {path} has no ColBERT token store for this model and doc_maxlen "
                                  f"{doc_maxlen} (key {key}); build it with `tessera ingest --index "
                                  f"{shlex.quote(str(path))} --colbert MODEL` or "
                                  "operators.store.token_store.build_token_store")
        return store
    index_dir = path.parent.parent
    index = _open_index(index_dir) if path.parent.name == STORE_DIR and (index_dir / "manifest.json").is_file() \
        else None
    store = TokenStore(path, index=index)
    if store.meta.get("key") != key:
        raise TokenStoreError(f"token store {path} was built for another model or encoding (key "
                              f"{store.meta.get('key')}, this reranker needs {key}: model identity, doc_maxlen "
                              f"{doc_maxlen}, text column {text_column!r}, title column {title_column!r})")
    return store


def _bar(total: int, progress: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="colbert tokens", unit="docs", unit_scale=True, disable=not progress,
                file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
