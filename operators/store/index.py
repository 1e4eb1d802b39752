"""``Index``: a directory of immutable shards tied together by ``manifest.json``.

Writers (``write_shard``) only add shard folders, so Ray workers may write in
parallel; ``commit`` is the single point that changes what is searchable: under an
fcntl lock it re-reads the manifest, records finished shards and tombstones, and
replaces the manifest atomically (``commit_shards``, ``commits``). A shard whose commit
fails is removed by the call that wrote it. Readers load shards lazily, once, check their
files' sha256, and notice a newer manifest by its file stat; the search itself runs on one
such generation (``index_reads``, ``search``). A damaged shard fails every search, naming each damaged
shard: skipping it would silently drop its documents and change every BM25 score. Deletes
and upserts are tombstones (row positions per shard), so nothing is rebuilt; BM25
statistics are re-derived over live chunks.

Usage::

    index = Index.create("idx", IndexSettings(dense=False))
    index.add(pa.table({"docno": ["d1"], "doc_id": ["d1"], "text": ["honey bees"]}))
    index.search_bm25(["bees"], k=10)[0].docnos  # ['d1']
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa
from pydantic import ValidationError

from operators.store import commit_shards, commits, compaction, search, shard as shard_io
from operators.store.disk import refused_by_disk
from operators.store.commits import Commit
from operators.store.errors import IndexExistsError, IndexStoreError, ShardDataError, listed_ids, settings_mismatch
from operators.store.index_reads import IndexReads
from operators.store.layout import (MANIFEST, SHARDS, check_new_index_path, expand_user, file_lock, new_shard_id,
                                    read_manifest, resolve_index, write_manifest)
from operators.store.settings import IndexSettings, Manifest, ShardInfo, settings_problem
from operators.store.snapshot import Snapshot

#: ``compact`` removes folders no commit recorded once they are this old (their writers died).
UNCOMMITTED_GRACE_S = 3600
#: How many times ``compact`` redoes its merge when another commit lands while it writes.
COMPACT_ATTEMPTS = 3


class Index(IndexReads):
    """A sharded BM25 + dense index on disk (see the module docstring); its searches and doc-store reads are
    inherited from ``IndexReads``."""

    def __init__(self, path: Path, manifest: Manifest, *, verify: bool = True) -> None:
        self.path = path
        self.verify = verify
        self._manifest = manifest
        self._manifest_file = os.fspath(path / MANIFEST)  # stat-ed by every search: joined once
        self._stat = self._manifest_stat()
        self._lock = threading.RLock()
        self._loaded: dict[tuple[str, str], shard_io.Shard] = {}
        self._reads = commit_shards.ShardReads(path / SHARDS)  # what commits read of each shard version, once
        self._state: Snapshot | None = None
        self._pool = search.ShardPool()  # threads for searches over several shards, started when one needs them

    def __reduce__(self):  # Ray tasks get a handle that reopens the index where it lands
        return (Index.open, (str(self.path),), {"verify": self.verify})

    def __setstate__(self, state: dict) -> None:
        self.verify = state["verify"]

    # -- create / open -----------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike, settings: IndexSettings | dict | None = None) -> "Index":
        """A new empty index at ``path``; an index with the same settings there is opened instead. Refused where
        it would fail or harm (``layout.check_new_index_path``: a file, a folder whose manifest is lost...)."""
        path = expand_user(path)
        if not isinstance(settings, IndexSettings):
            try:
                settings = IndexSettings.model_validate(settings or {})
            except ValidationError:  # said as a spec's index_settings' problem is, naming the key
                problem = settings_problem(settings or {})
                raise IndexStoreError(problem.message, field=problem.key) from None
        check_new_index_path(path)
        # an index there already is opened to be written (its lock taken): "creating it" misled of an ingest into it
        with refused_by_disk(path, "opening it to write" if (path / MANIFEST).is_file() else "creating it"):
            return cls._create(path, settings)

    @classmethod
    def _create(cls, path: Path, settings: IndexSettings) -> "Index":
        path.mkdir(parents=True, exist_ok=True)
        with file_lock(path):
            if (path / MANIFEST).exists():
                existing = cls.open(path)
                if existing.settings != settings:
                    raise IndexExistsError(settings_mismatch(path, settings.model_dump(mode="json"),
                                                             existing.settings.model_dump(mode="json")))
                return existing
            check_new_index_path(path)  # shards another process left meanwhile, under this lock
            manifest = Manifest(settings=settings, encoder_weights=encoder_weights(settings))
            write_manifest(path, manifest)
        return cls(path, manifest)

    @classmethod
    def open(cls, path: str | os.PathLike, *, verify: bool = True) -> "Index":
        """The index at ``path`` (or the named index under $TESSERA_HOME/indices); ``verify`` checks
        each shard file's sha256 when the shard loads."""
        path = resolve_index(path)
        return cls(path, read_manifest(path), verify=verify)

    # -- what is in it -------------------------------------------------------------------

    @property
    def settings(self) -> IndexSettings:
        return self._manifest.settings

    @property
    def manifest(self) -> Manifest:
        self.refresh()
        return self._manifest

    @property
    def generation(self) -> int:
        return self.manifest.generation

    def finished_shards(self) -> set[str]:
        """Ids of every shard committed into the index, those a compaction merged into others included (a resumed
        ingestion skips them; ``manifest.shards`` lists the shards on disk)."""
        return commit_shards.finished(self.manifest)

    def counts(self) -> dict[str, Any]:
        """Shards, chunks written, tombstones, live chunks."""
        return self.manifest.counts()

    def __len__(self) -> int:
        return self.counts()["live_chunks"]

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, generation={self._manifest.generation}, {self._manifest.counts()})"

    def refresh(self) -> bool:
        """Re-read the manifest if another process replaced it; True when it changed."""
        stat = self._manifest_stat()
        if stat == self._stat:
            return False
        with self._lock:
            manifest = read_manifest(self.path)
            self._stat = stat
            changed = not manifest.same_version(self._manifest)
            self._manifest = manifest
            return changed

    def _manifest_stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._manifest_file)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    # -- writing -------------------------------------------------------------------------

    def write_shard(self, shard_id: str, chunks: pa.Table, embedded_as: str | None = None) -> ShardInfo:
        """Write ``shards/<shard_id>`` atomically (not visible until ``commit``).

        ``chunks``: docno, doc_id, text, [title], [metadata...], and ``vector``
        (fixed_size_list<float32>[dim]) when the index is dense (``embedded_as``: how, ``ShardInfo``). Safe from
        parallel processes; an uncommitted shard id may be written again, a committed one may not.
        """
        shard_io.check_shard_id(shard_id)
        if shard_id in self.finished_shards():
            raise self._committed_already(shard_id)
        with refused_by_disk(self.path, f"writing shard {shard_id!r}"):
            return shard_io.write(self.path / SHARDS, self.settings, shard_id, chunks,
                                  guard=lambda: self._uncommitted(shard_id), embedded_as=embedded_as)

    @contextlib.contextmanager
    def _uncommitted(self, shard_id: str) -> Iterator[None]:
        """Held while a written shard's folder takes its place: the id is still uncommitted (another writer of the
        same id, an ingest of the same source, may have committed it while this one wrote, and a compaction may
        have merged it since), and stays so until the folder is in place; a committed shard's folder is never
        replaced under the manifest that lists it."""
        with file_lock(self.path):
            if shard_id in commit_shards.finished(read_manifest(self.path)):
                raise self._committed_already(shard_id)
            yield

    def _committed_already(self, shard_id: str) -> ShardDataError:
        return ShardDataError(f"shard {shard_id!r} is already committed in {self.path}; "
                              "shards are immutable: write under a new id", field="shard_id")

    def commit(self, infos: Sequence[ShardInfo], *, replace_doc_ids: Iterable[str] | None = None,
               before_write: Callable[[], None] | None = None,
               refuse_live_doc_ids: bool | Callable[[str], bool] = False) -> Commit:
        """Record finished shards in the manifest; with ``replace_doc_ids``, tombstone the chunks of
        those doc ids in every other shard in the same manifest write. Committing a shard again is a no-op.
        A failed commit leaves the written shards in place (``discard`` removes them). A shard holding a docno
        that is live is refused; with ``refuse_live_doc_ids``, one holding a live doc id too: True counts every
        shard's, a predicate of a shard id the shards it names (an ingest checked the ids before it embedded, and
        this check, under the lock, also catches a document added meanwhile).

        ``before_write`` runs under the index's lock just before the manifest is written, unless the manifest
        listed every one of ``infos`` already (``Commit.already``): a caller's own record of the commit (an
        ingest's failure ledger) is then written by one of two writers of the same shard, and always before the
        manifest names it. If it raises, nothing is committed."""
        return self._commit(infos, replace_doc_ids=replace_doc_ids, before_write=before_write,
                            refuse_live_doc_ids=refuse_live_doc_ids)

    def add(self, chunks: pa.Table, shard_id: str | None = None) -> ShardInfo:
        """Add chunks as a new shard; their docnos and doc ids must not be live yet (else nothing is left behind)."""
        info = self.write_shard(shard_id or new_shard_id("add"), chunks)
        self._commit_written([info], refuse_live_doc_ids=True)
        return info

    def upsert(self, chunks: pa.Table, shard_id: str | None = None) -> Commit:
        """Replace every chunk of the doc ids in ``chunks`` by ``chunks``: a new shard and tombstones,
        in one commit (if writing fails, the old version stays). ``Commit.tombstoned`` is what it replaced."""
        info = self.write_shard(shard_id or new_shard_id("upsert"), chunks)
        doc_ids = set(chunks.column("doc_id").cast(pa.string()).to_pylist())
        return self._commit_written([info], replace_doc_ids=doc_ids)

    def delete(self, doc_ids: Iterable[str] | None = None, docnos: Iterable[str] | None = None) -> int:
        """Tombstone every live chunk of ``doc_ids`` and the chunks ``docnos``; returns how many."""
        if doc_ids is None and docnos is None:
            raise IndexStoreError("delete needs doc_ids or docnos")
        return self._commit([], replace_doc_ids=listed_ids(doc_ids, "doc_ids"),
                            delete_docnos=listed_ids(docnos, "docnos")).tombstoned

    def delete_documents(self, doc_ids: Iterable[str]) -> dict[str, int]:
        """Tombstone every live chunk of ``doc_ids``; the chunks each document lost by this call, read under the
        commit's lock (a document another writer deleted meanwhile is not there)."""
        return self._commit([], replace_doc_ids=listed_ids(doc_ids, "doc_ids")).tombstoned_docs

    def discard(self, infos: Sequence[ShardInfo]) -> list[str]:
        """Remove shards written for a commit that failed (never a committed shard); returns their ids."""
        return commits.discard(self.path, infos)

    def uncommitted(self) -> list[str]:
        """Folders under ``shards/`` that no commit recorded (left by writers that died, or about to commit)."""
        return commits.uncommitted(self.path, self.manifest)

    def remove_uncommitted(self, older_than_s: float = UNCOMMITTED_GRACE_S) -> list[str]:
        """Delete the ``uncommitted`` folders older than ``older_than_s``; returns their names."""
        return commits.remove_uncommitted(self.path, older_than_s)

    def check(self, *, checksums: bool = True) -> dict[str, str]:
        """Per damaged committed shard, what is wrong (a missing file, a sha256 mismatch); reads every file."""
        found = {info.id: shard_io.damage(self.path / SHARDS / info.id, info, checksums=checksums)
                 for info in self.manifest.shards}
        return {shard_id: problem for shard_id, problem in found.items() if problem}

    def compact(self, max_chunks: int = 100_000,
                on_progress: compaction.CompactProgressCallback | None = None) -> compaction.CompactionSummary:
        """Rewrite the live chunks into new shards of at most ``max_chunks`` and drop the old shards
        and their tombstones; what it did (the new shards, shards and chunks before, tombstones dropped, seconds).
        When another commit lands meanwhile, the merge is redone on the new generation,
        up to ``COMPACT_ATTEMPTS`` times in all (then ``CommitConflictError``; nothing changed). The old shards' ids
        stay ``finished_shards`` (an ingestion run again skips them, as before the compaction). The old shard
        folders are left for ``remove_uncommitted`` (after its grace period): a reader that read the old
        manifest may still be loading them. ``on_progress`` hears a ``compaction.CompactProgress`` as each old
        shard is merged, in manifest order."""
        return compaction.compact(self, max_chunks, attempts=COMPACT_ATTEMPTS, on_progress=on_progress)

    def _commit_written(self, infos: Sequence[ShardInfo], **changes: Any) -> Commit:
        """Commit shards this call wrote; if the commit fails, remove them before the error goes on."""
        try:
            return self._commit(infos, **changes)
        except BaseException:
            self.discard(infos)
            raise

    def _commit(self, infos: Sequence[ShardInfo], *, replace_doc_ids=None, delete_docnos=None,
                remove_shards: Sequence[str] = (), expected_generation: int | None = None,
                refuse_live_doc_ids: bool | Callable[[str], bool] = False,
                before_write: Callable[[], None] | None = None) -> Commit:
        """The one change of what is searchable: under the index's lock, the manifest as it is now, changed by
        ``commit_shards.record`` and written back."""
        with refused_by_disk(self.path, "committing"), self._lock, file_lock(self.path):
            manifest = read_manifest(self.path)
            done = commit_shards.record(
                manifest, infos, self._reads, path=self.path, replace=set(replace_doc_ids or ()),
                drop_docnos=set(delete_docnos or ()), remove_shards=remove_shards,
                expected_generation=expected_generation, refuse_live_doc_ids=refuse_live_doc_ids)
            if before_write is not None and len(done.already) < len(infos):
                before_write()
            write_manifest(self.path, manifest)
            self._manifest, self._stat = manifest, self._manifest_stat()
        return done

    def live_doc_ids(self, counted: Callable[[str], bool] = lambda shard_id: True) -> set[str]:
        """The ids of the documents with a live passage in a shard that ``counted`` names (every shard by default):
        what an ingestion checks its documents against before it embeds them (the commit checks again, under the
        lock, with the same predicate as ``refuse_live_doc_ids``)."""
        manifest = self.manifest
        live: set[str] = set()
        for info in manifest.shards:
            if not counted(info.id):
                continue
            doc_ids = self._reads.ids(info)[1]
            live.update(str(d) for d in doc_ids[shard_io.live_mask(manifest, info.id, len(doc_ids))].tolist())
        return live

    def shard_doc_ids(self, info: ShardInfo) -> set[str]:
        """The document ids of a written shard (what ``commit(..., replace_doc_ids=...)`` replaces)."""
        return {str(d) for d in self._reads.ids(info)[1]}


def encoder_weights(settings: IndexSettings) -> str | None:
    """The fingerprint of the files of the encoder that embeds an index's chunks, None without vectors or without
    that model here (``Manifest.encoder_weights``)."""
    if not settings.dense:
        return None
    from operators.models.fingerprint import weights_fingerprint
    from operators.models.references import ModelNotFoundError

    try:
        return weights_fingerprint(settings.encoder)
    except (ModelNotFoundError, OSError):
        return None


def other_encoder_weights(index: "Index") -> tuple[str, str] | None:
    """(when made, here): the fingerprints of the index's encoder when it was made and on this machine, where both are
    known and differ (the encoder retrained since under its name, or another copy); None otherwise."""
    made, now = index.manifest.encoder_weights, encoder_weights(index.settings)
    return (made, now) if made and now and made != now else None
