"""Unchanged text keeps its vectors: where a run replaces documents, the embed step takes the index's vectors of
the chunks whose text it holds instead of encoding them again.

A sync stages the source again from its first change on (``flows.ingestion.resync``: shards are slices of the
source, so one file removed near the start moves every later document to another shard), and every document from
there passes the embed step again, though most are as they were; ``--replace`` and a file uploaded again to the
service replace every document they carry, most often an edited copy of the same text. Before such a run embeds
anything, the driver lists the index's chunks of the documents it replaces (a sync's retired ones, the replaced
ids, the documents of the files it replaces) by a digest of the string the encoder is given for each (the embed
step's ``texts``: title, text and prompt as configured) and where each lies (shard folder, row), in
``<staging>/reuse.parquet``. The embed step, in-process or on each Ray actor, looks each chunk up there and takes
the stored vector of a hit (``store.dense.vectors``: a flat, HNSW or IVF index gives its vectors back exactly, a
quantising one keeps ``vectors.npy``). They are the vectors this encoder gives the text: the index's settings and
encoder weights are the run's (``job_params.check_job``, ``store.index.other_encoder_weights``). A shard folder
gone meanwhile (merged by a compaction) only means its chunks are encoded again, as without this.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

log = logging.getLogger("tessera.ingest")
#: In a source's staging folder while a run that replaces documents embeds.
REUSE_FILE = "reuse.parquet"
#: Shards whose vectors an embed step keeps loaded: a restaged shard's chunks come from one or two old shards.
LOADED_SHARDS = 4


def digests(texts: Iterable[str]) -> np.ndarray:
    """16-byte digests of the strings the encoder would be given."""
    return np.array([hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest() for t in texts],
                    dtype="S16")


def edit_params(encoder: str) -> dict[str, Any]:
    """The embed params of ``tessera index add`` and ``update`` (``flows.commands.index_file``)."""
    return {"model": encoder, "title_column": "title"}


def write(index_path: str | Path, staging: Path, doc_ids: set[str], embed: dict[str, Any]) -> str | None:
    """Write ``<staging>/reuse.parquet``: the index's chunks of ``doc_ids`` by the digest of their embedded text,
    from the shards embedded as ``embed`` embeds (``made_alike``). Returns its path, or None when the index has no
    vectors or none of those documents."""
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder
    from operators.store.layout import SHARDS, read_manifest
    from operators.store.shard import read_docs

    manifest = read_manifest(Path(index_path))
    if not manifest.settings.dense or not doc_ids:
        return None
    op = SentenceTransformerEmbedder(embed, step_id="embed")  # its texts(): no model loads
    alike = made_alike(Path(index_path), manifest, embed)
    names = [c for c in (op.params.input_column, op.params.title_column) if c]
    shards_dir, wanted = Path(index_path) / SHARDS, pa.array(sorted(doc_ids), pa.string())
    parts = []
    for info in manifest.shards:
        if not alike(info):
            continue
        folder = shards_dir / info.id
        ids = read_docs(folder, ["doc_id"]).column("doc_id").cast(pa.string())
        rows = np.flatnonzero(pc.is_in(ids, value_set=wanted).to_numpy(zero_copy_only=False))
        if not len(rows):
            continue
        parts.append(pa.table({"digest": pa.array(digests(op.texts(read_docs(folder, names).take(rows))),
                                                  pa.binary(16)),
                               "folder": pa.array([str(folder)] * len(rows), pa.string()).dictionary_encode(),
                               "row": pa.array(rows, pa.int64())}))
    if not parts:
        return None
    from operators.atomic import write_bytes

    buffer = io.BytesIO()
    pq.write_table(pa.concat_tables(parts), buffer)
    path = staging / REUSE_FILE
    write_bytes(path, buffer.getvalue())
    return str(path)


def made_alike(index_path: Path, manifest, embed: dict[str, Any]) -> Callable[[Any], bool]:
    """Whether a shard's vectors (its ``ShardInfo``) were made from the strings ``embed`` would give the encoder: the
    same text, title and prompt joined the same way (``VECTOR_PARAMS``). A shard records how (``embedded_as``, this
    module's ``fingerprint``); one written before it did is known by its source's ``job.json`` (a retry's and a
    sync's shards too), ``index add``/``update``'s by ``edit_params``, a compaction's only where every shard the
    index ever had was made alike. Another way of embedding (an ingest with a ``prompt``, without titles) would give
    the same text another vector: not taken."""
    from flows.ingestion.errors import read_staging_json
    from flows.ingestion.job_params import JOB_FILE
    from flows.ingestion.unrecorded import source_key_of
    from operators.store.compaction import COMPACTED
    from operators.store.upgrade import STAGING_DIR

    encoder = manifest.settings.encoder
    ours, known = fingerprint(embed, encoder), {}

    def made_as(shard: str) -> str | None:
        kind = shard.split("-", 1)[0]
        if kind in ("add", "upsert"):
            return fingerprint(edit_params(encoder), encoder)
        key = source_key_of(shard)
        if key not in known:
            job = read_staging_json(index_path / STAGING_DIR / key / JOB_FILE) if key else None
            known[key] = fingerprint(job["embed"], encoder) if job and job.get("embed") else None
        return known[key]

    recorded = {s.id: s.embedded_as for s in manifest.shards if s.embedded_as is not None}
    others = [s for s in [s.id for s in manifest.shards] + list(manifest.merged_shards)
              if s not in recorded and not s.startswith(COMPACTED + "-")]
    mixed_alike = all(v == ours for v in recorded.values()) and all(made_as(s) == ours for s in others)

    def alike(info) -> bool:
        if info.embedded_as is not None:
            return info.embedded_as == ours
        return mixed_alike if info.id.startswith(COMPACTED + "-") else made_as(info.id) == ours

    return alike


def fingerprint(embed: dict[str, Any], encoder: str) -> str:
    """The embed params that make a text's vector (``VECTOR_PARAMS``, defaults filled in), as a short digest."""
    import json

    return hashlib.sha256(json.dumps(_vector_params(embed, encoder)).encode()).hexdigest()[:16]


def _vector_params(embed: dict[str, Any], encoder: str) -> tuple:
    from flows.ingestion.job_params import VECTOR_PARAMS
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder

    given = {"model": encoder, **{k: v for k, v in embed.items() if k in VECTOR_PARAMS and v is not None}}
    params = SentenceTransformerEmbedder(given, step_id="embed").params
    return tuple(getattr(params, k) for k in VECTOR_PARAMS)


def replaced_ids(paths: Iterable[Path]) -> set[str]:
    """The ids of the documents in staged shard files (``--replace``: those the run replaces, where the index has
    them); a file another ingest of the source finished and deleted meanwhile has none left to embed."""
    from flows.ingestion.staged_files import staged_ids

    ids: set[str] = set()
    for path in paths:
        try:
            ids.update(staged_ids(path))
        except FileNotFoundError:
            continue
    return ids


def remove(staging: Path) -> None:
    (staging / REUSE_FILE).unlink(missing_ok=True)


class Reuse:
    """The vectors of ``reuse.parquet``'s chunks, looked up by text; read when first asked."""

    def __init__(self, path: str, dim: int):
        self.path, self.dim = Path(path), dim
        self._digests: np.ndarray | None = None  # sorted
        self._folders: list[str] = []
        self._where: np.ndarray | None = None  # per digest: (folder index, row)
        self._loaded: OrderedDict[int, np.ndarray | None] = OrderedDict()

    def fill(self, rows: np.ndarray, texts: list[str], vectors: np.ndarray) -> np.ndarray:
        """Set ``vectors[i]`` for each of ``rows`` whose text the index holds; returns those rows."""
        self._read()
        if not len(self._digests):
            return rows[:0]
        wanted = digests(texts[i] for i in rows)
        at = np.minimum(np.searchsorted(self._digests, wanted), len(self._digests) - 1)
        taken = []
        for i, hit, position in zip(rows, self._digests[at] == wanted, at):
            if hit:
                folder, row = self._where[position]
                found = self._vectors(int(folder))
                if found is not None and row < len(found):
                    vectors[i] = found[row]
                    taken.append(i)
        return np.array(taken, dtype=rows.dtype)

    def _read(self) -> None:
        if self._digests is not None:
            return
        try:
            table = pq.read_table(self.path)
        except (OSError, pa.ArrowInvalid) as err:  # removed by another run's end meanwhile: nothing to take
            log.info("the list of vectors to keep could not be read (%s): every chunk is encoded", err)
            table = pa.table({"digest": pa.array([], pa.binary(16)), "folder": pa.array([], pa.string()),
                              "row": pa.array([], pa.int64())})
        folder = table.column("folder").combine_chunks()
        if not isinstance(folder.type, pa.DictionaryType):
            folder = folder.dictionary_encode()
        self._folders = folder.dictionary.to_pylist()
        found = np.array(table.column("digest").to_pylist(), dtype="S16")
        order = np.argsort(found, kind="stable")
        self._digests = found[order]
        self._where = np.stack([folder.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                                table.column("row").to_numpy()], axis=1)[order] if len(order) else np.zeros((0, 2))

    def _vectors(self, folder: int) -> np.ndarray | None:
        """The vectors of one shard folder (the last ``LOADED_SHARDS`` kept), None where they cannot be read."""
        if folder in self._loaded:
            self._loaded.move_to_end(folder)
            return self._loaded[folder]
        from operators.store import dense

        path = Path(self._folders[folder])
        try:
            found = dense.vectors(dense.load(path), path)
        except (OSError, RuntimeError, ValueError) as err:  # merged away by a compaction: encoded again
            log.info("the vectors of %s could not be read (%s): its chunks are encoded again", path, err)
            found = None
        if found is not None and (found.ndim != 2 or found.shape[1] != self.dim):
            found = None
        self._loaded[folder] = found
        if len(self._loaded) > LOADED_SHARDS:
            self._loaded.popitem(last=False)
        return found
