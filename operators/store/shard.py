"""Writing and loading one shard directory: docs.parquet, BM25 statistics, dense.faiss.

A shard is written into a hidden temporary folder beside its final place and renamed
into ``shards/<id>`` when complete, so a crash leaves either nothing or a whole
shard; ``shard.json`` inside it is the ShardInfo the manifest will record. Its writer holds
the temporary folder's lock (``operators.stale_writes``) until then, so the folder of a
writer killed outright is told from a live one's (``commits.remove_abandoned_writes``).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import uuid
from pathlib import Path
from typing import Callable, ContextManager, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from operators.atomic import file_sha256, fsync, replace_folder
from operators.stale_writes import WriterLock, remove_abandoned_in
from operators.store import bm25, dense
from operators.store.errors import IndexCorruptError, ShardDataError
from operators.store.settings import IndexSettings, Manifest, ShardInfo

DOCS_FILE, INFO_FILE = "docs.parquet", "shard.json"
SHARD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
STRING_COLUMNS = ("docno", "doc_id", "text", "title")
#: A shard being written: ``shards/.tmp-<id>-<random>``, renamed to ``shards/<id>`` when whole.
TMP_PREFIX = ".tmp-"


def check_shard_id(shard_id: str) -> None:
    if not isinstance(shard_id, str) or not SHARD_ID.match(shard_id):
        raise ShardDataError(f"bad shard id {shard_id!r}: use 1-128 letters, digits, '.', '_' or '-', "
                             "starting with a letter or digit", field="shard_id")


def split_chunks(chunks: pa.Table, settings: IndexSettings, shard_id: str) -> tuple[pa.Table, np.ndarray | None]:
    """Check ``chunks`` and split it into the doc-store table and the (n, dim) vectors."""
    where = f"shard {shard_id!r}"
    if not isinstance(chunks, pa.Table):
        raise ShardDataError(f"{where}: chunks must be a pyarrow.Table, got {type(chunks).__name__}")
    required = ["docno", "doc_id", "text"] + (["vector"] if settings.dense else [])
    missing = [c for c in required if c not in chunks.column_names]
    if missing:
        raise ShardDataError(f"{where}: chunks lack column(s) {missing}; they have {chunks.column_names}",
                             field=missing[0])
    if chunks.num_rows == 0:
        raise ShardDataError(f"{where}: no chunks to write")
    for name in STRING_COLUMNS:
        if name in chunks.column_names and chunks.column(name).type != pa.string():
            try:
                chunks = chunks.set_column(chunks.column_names.index(name), name, chunks.column(name).cast(pa.string()))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise ShardDataError(f"{where}: column {name!r} is {chunks.column(name).type}, "
                                     f"not castable to string ({err})", field=name) from None
    chunks = _with_title(chunks)
    for name in ("docno", "doc_id"):
        nulls = chunks.column(name).null_count
        if nulls:
            raise ShardDataError(f"{where}: {nulls} chunk(s) have a null {name}", field=name)
    counts = pc.value_counts(chunks.column("docno"))
    dupes = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if len(dupes):
        raise ShardDataError(f"{where}: duplicate docno(s) {dupes.to_pylist()[:5]} "
                             f"({len(dupes)} in all); docno must be unique", field="docno")
    vectors = None
    if settings.dense:
        vectors = _vectors(chunks.column("vector"), settings.dim, where)
    docs = chunks.drop_columns([c for c in ("vector",) if c in chunks.column_names])
    return docs, vectors


def _with_title(chunks: pa.Table) -> pa.Table:
    """``chunks`` with a ``title`` of "" where a document has none: a reader gives no title column where none of a
    batch's records has one, and "" where another record has, so an index held "" and nulls for the same thing,
    and its searches gave ``title: None`` (``hit["title"][:20]`` failed)."""
    if "title" not in chunks.column_names:
        return chunks.add_column(chunks.column_names.index("text"), "title", pa.array([""] * chunks.num_rows))
    if chunks.column("title").null_count:
        return chunks.set_column(chunks.column_names.index("title"), "title",
                                 pc.fill_null(chunks.column("title"), ""))
    return chunks


def _vectors(column: pa.ChunkedArray, dim: int, where: str) -> np.ndarray:
    kind = column.type
    if not (pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        raise ShardDataError(f"{where}: column 'vector' is {kind}, expected fixed_size_list<float32>[{dim}]",
                             field="vector")
    if column.null_count:
        raise ShardDataError(f"{where}: {column.null_count} chunk(s) have no vector", field="vector")
    array = column.combine_chunks()
    lengths = (np.full(len(array), kind.list_size) if pa.types.is_fixed_size_list(kind)
               else pc.list_value_length(array).to_numpy())
    wrong = np.nonzero(lengths != dim)[0]
    if len(wrong):
        raise ShardDataError(f"{where}: vectors must have dim {dim} (the index's), got {int(lengths[wrong[0]])} "
                             f"for {len(wrong)} chunk(s)", field="vector")
    values = array.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, dim)
    if not np.isfinite(values).all():
        raise ShardDataError(f"{where}: vectors contain NaN or infinity", field="vector")
    return np.ascontiguousarray(values)


def write(shards_dir: Path, settings: IndexSettings, shard_id: str, chunks: pa.Table,
          guard: Callable[[], ContextManager[None]] | None = None, embedded_as: str | None = None) -> ShardInfo:
    """Write ``shards_dir/<shard_id>`` atomically and return its ShardInfo (the manifest is not touched).
    ``guard()`` is held while the finished folder takes its place (it may raise to leave the place as it is)."""
    check_shard_id(shard_id)
    docs, vectors = split_chunks(chunks, settings, shard_id)
    shards_dir.mkdir(parents=True, exist_ok=True)
    remove_abandoned_writes(shards_dir)
    tmp = shards_dir / f"{TMP_PREFIX}{shard_id}-{uuid.uuid4().hex[:12]}"
    with WriterLock(tmp):  # a writer killed outright leaves tmp with its lock free: the next write removes it
        tmp.mkdir()
        return _write(tmp, shards_dir, settings, shard_id, docs, vectors, guard, embedded_as)


def _write(tmp: Path, shards_dir: Path, settings: IndexSettings, shard_id: str, docs: pa.Table,
           vectors: np.ndarray | None, guard: Callable[[], ContextManager[None]] | None,
           embedded_as: str | None) -> ShardInfo:
    try:
        pq.write_table(docs, tmp / DOCS_FILE)
        names = [DOCS_FILE]
        n_terms = dense_info = None
        if settings.bm25:
            terms = bm25.ShardTerms.of_texts(bm25.indexed_texts(docs, settings), settings)
            names += terms.save(tmp)
            n_terms = len(terms.vocab)
        if settings.dense:
            index, dense_info = dense.build(vectors, settings)
            dense.save(index, tmp)
            names.append(dense.DENSE_FILE)
            if not dense.keeps_exact_vectors(dense_info.factory):
                np.save(tmp / dense.VECTORS_FILE, vectors)
                names.append(dense.VECTORS_FILE)
        for name in names:
            fsync(tmp / name)
        files = {n: file_sha256(tmp / n, remember=False) for n in names}
        info = ShardInfo(id=shard_id, n_chunks=docs.num_rows, files=files, columns=docs.column_names,
                         dense=dense_info, n_terms=n_terms, token=uuid.uuid4().hex,
                         embedded_as=embedded_as if settings.dense else None)
        (tmp / INFO_FILE).write_text(info.model_dump_json(indent=1), encoding="utf-8")
        fsync(tmp / INFO_FILE)
        with guard() if guard is not None else contextlib.nullcontext():
            replace_folder(tmp, shards_dir / shard_id)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return info


def remove_abandoned_writes(shards_dir: Path) -> list[str]:
    """Remove the temporary folders (and lock files) under ``shards_dir`` whose writer's lock is free: writers
    killed outright (SIGKILL, a lost node), whose folders no commit will ever record; returns their names. One
    without a lock file (a write by an earlier release) is left to ``commits.remove_uncommitted``'s age rule."""
    return remove_abandoned_in(shards_dir, TMP_PREFIX)


def read_info(folder: Path) -> ShardInfo | None:
    """The ShardInfo a finished write left in ``folder``, or None when there is none."""
    try:
        return ShardInfo.model_validate_json((folder / INFO_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as err:
        raise IndexCorruptError(f"unreadable {folder / INFO_FILE}: {err}") from None


def damage(folder: Path, info: ShardInfo, *, checksums: bool = True) -> str | None:
    """What is wrong with a committed shard's files (a file missing, or not matching its sha256 in the
    manifest when ``checksums``), or None when they are sound."""
    for name, digest in info.files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if checksums and file_sha256(path, remember=False) != digest:
            return f"{name} does not match its sha256 in the manifest"
    return None


def damaged_error(index_path: Path, damaged: dict[str, str], more: str = "") -> IndexCorruptError:
    """The error of an index with damaged shards, naming each one and what is wrong (docs/indices.md)."""
    return IndexCorruptError(
        f"index {index_path} has {len(damaged)} damaged shard(s): "
        + "; ".join(f"{shard_id} ({problem})" for shard_id, problem in damaged.items())
        + ". Every search fails until they are restored or the index is rebuilt" + more)


class Shard:
    """A loaded shard: doc store, BM25 statistics and FAISS index (each when the index has it).

    Its files are checked by the caller first (``damage``), so one error can name every damaged shard."""

    def __init__(self, folder: Path, info: ShardInfo, settings: IndexSettings) -> None:
        self.folder, self.info = folder, info
        try:  # a file removed after ``damage`` looked (a superseded shard cleaned up): the caller may retry
            self.docs = pq.read_table(folder / DOCS_FILE, memory_map=True)
            self.terms = bm25.ShardTerms.load(folder) if settings.bm25 else None
            self.dense = dense.load(folder) if settings.dense else None
        except (OSError, pa.ArrowInvalid, ValueError) as err:
            raise IndexCorruptError(f"shard {info.id!r}: cannot load {folder}: {err}") from None
        self.docnos = np.asarray(self.docs.column("docno").to_numpy(zero_copy_only=False), dtype=object)
        self.doc_ids = np.asarray(self.docs.column("doc_id").to_numpy(zero_copy_only=False), dtype=object)

    def __len__(self) -> int:
        return self.docs.num_rows

    def vectors(self) -> np.ndarray:
        return dense.vectors(self.dense, self.folder)

    def matches(self, where, lacking: Sequence[pa.Field] = ()) -> np.ndarray:
        """Boolean mask of rows satisfying the pyarrow expression ``where``; ``lacking``: columns of the index this
        shard has not (documents added later brought them), read as null here (``docs_with``)."""
        rows = self.docs_with(lacking).append_column("__row", pa.array(np.arange(len(self), dtype=np.int64)))
        picked = rows.filter(where).column("__row").to_numpy()
        mask = np.zeros(len(self), dtype=bool)
        mask[picked] = True
        return mask

    def docs_with(self, lacking: Sequence[pa.Field]) -> pa.Table:
        """The doc store with a column of nulls for each of ``lacking`` (a column this shard does not have)."""
        docs = self.docs
        for column in lacking:
            docs = docs.append_column(column, pa.nulls(len(self), column.type))
        return docs


def live_mask(manifest: Manifest, shard_id: str, rows: int) -> np.ndarray:
    """Which of a shard's ``rows`` rows are live under ``manifest`` (its tombstones are not)."""
    mask = np.ones(rows, dtype=bool)
    mask[manifest.tombstones.get(shard_id, [])] = False
    return mask


def live_vectors(shards_dir: Path, manifest: Manifest) -> dict[str, np.ndarray]:
    """Each live chunk's vector by docno, read from the shards' FAISS files (``vectors.npy`` where the index
    quantises): what compares two indices' vectors (a synced index against one built again)."""
    found: dict[str, np.ndarray] = {}
    for info in manifest.shards:
        folder = shards_dir / info.id
        docnos = read_docs(folder, ["docno"]).column("docno").to_pylist()
        live = live_mask(manifest, info.id, len(docnos))
        found.update((d, v) for d, v, ok in zip(docnos, dense.vectors(dense.load(folder), folder), live) if ok)
    return found


def live_docs(shards_dir: Path, manifest: Manifest, names: Sequence[str] | None,
              loaded: dict[tuple[str, str], Shard]) -> list[pa.Table]:
    """Per shard of ``manifest``: the live rows of its doc-store columns ``names`` (a shard's missing ones left
    out). A loaded shard's table is used as it is; another's columns are read alone from its file, memory-mapped,
    so listing documents or checking ids loads no BM25 statistics and no FAISS index."""
    parts = []
    for info in manifest.shards:
        shard = loaded.get((info.id, info.token))
        docs = shard.docs if shard is not None else read_docs(shards_dir / info.id, names)
        docs = docs.filter(pa.array(live_mask(manifest, info.id, docs.num_rows)))
        if docs.num_rows:  # a shard with no live row adds nothing, not even its columns' types
            parts.append(docs)
    return parts


def live_docs_of(shards_dir: Path, manifest: Manifest, doc_id: str, names: Sequence[str],
                 loaded: dict[tuple[str, str], Shard]) -> list[pa.Table]:
    """Per shard of ``manifest`` holding document ``doc_id``: the live rows of its passages, columns ``names``. The
    ``doc_id`` column is read first and the others only where the document is, so the texts of the rest of the
    doc store are not read."""
    parts = []
    for info in manifest.shards:
        shard = loaded.get((info.id, info.token))
        folder = shards_dir / info.id
        ids = (shard.docs if shard is not None else read_docs(folder, ["doc_id"])).column("doc_id").cast(pa.string())
        mine = pc.and_(pa.array(live_mask(manifest, info.id, len(ids))),
                       pc.fill_null(pc.equal(ids, pa.scalar(doc_id, pa.string())), False))
        if pc.any(mine).as_py():
            docs = shard.docs if shard is not None else read_docs(folder, names)
            parts.append(docs.select([n for n in names if n in docs.column_names]).filter(mine))
    return parts


def doc_column_names(shards_dir: Path, manifest: Manifest, loaded: dict[tuple[str, str], Shard]) -> list[str]:
    """Every doc-store column of the shards of ``manifest``, in the order they first appear (schemas only)."""
    names: list[str] = []
    for info in manifest.shards:
        shard = loaded.get((info.id, info.token))
        names += shard.docs.column_names if shard is not None else docs_schema(shards_dir / info.id).names
    return list(dict.fromkeys(names))


def read_docs(folder: Path, names: Sequence[str] | None) -> pa.Table:
    """The doc-store columns ``names`` of the shard in ``folder`` (None: all; the ones it lacks left out),
    memory-mapped; an unreadable file is an ``IndexCorruptError`` naming the shard."""
    path = folder / DOCS_FILE
    try:
        present = pq.read_schema(path).names
        columns = [n for n in names if n in present] if names is not None else None
        return pq.read_table(path, columns=columns, memory_map=True)
    except (OSError, pa.ArrowInvalid) as err:
        raise _unreadable(path, err) from None


def docs_schema(folder: Path) -> pa.Schema:
    try:
        return pq.read_schema(folder / DOCS_FILE)
    except (OSError, pa.ArrowInvalid) as err:
        raise _unreadable(folder / DOCS_FILE, err) from None


def _unreadable(path: Path, err: Exception) -> IndexCorruptError:
    return IndexCorruptError(f"shard {path.parent.name!r}: cannot read {path}: {err}")
