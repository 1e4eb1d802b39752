"""Manifests of an earlier format: format 1 (before 2026-11-30, no ``merged_shards``) is read and written as format 2
at the first write, with the shards an earlier release's compaction merged recovered from the ingestion staging
(``operators.store.upgrade``); a later format is refused. The flows side (a real ingestion, ``tessera index info``,
ingesting again): tests/flows/test_ingest_after_old_compaction.py."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.ingestion import staging
from operators.store import Index, IndexSettings
from operators.store.errors import IndexCorruptError


def _rewrite(index: Path, **changes) -> None:
    """The manifest with ``changes`` (a value of None: the key dropped), as another release wrote it."""
    raw = json.loads((index / "manifest.json").read_text())
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    (index / "manifest.json").write_text(json.dumps(raw, indent=1), encoding="utf-8")


def _on_disk(index: Path) -> dict:
    return json.loads((index / "manifest.json").read_text())


def _committed(tmp_path, sample_docs, make_chunks, n_shards: int, per: int = 5) -> Index:
    """Shards ``src-00000``... committed one by one, as an ingestion commits them."""
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    for i in range(n_shards):
        index.commit([index.write_shard(f"src-{i:05d}", make_chunks(sample_docs[i * per:(i + 1) * per]))])
    return index


def _stage(index: Index, shards: dict[str, list[dict] | None]) -> None:
    """``_ingest/src/`` as an ingestion leaves it (``flows.ingestion.staging``): ``state.json`` plans every shard,
    and a shard's documents stay staged (``<id>.parquet``) until its commit (None: committed, deleted)."""
    folder = index.path / staging.STAGING_DIR / "src"
    folder.mkdir(parents=True)
    for shard_id, docs in shards.items():
        if docs is not None:
            pq.write_table(pa.table({"docno": [d["_id"] for d in docs], "text": [d["text"] for d in docs]}),
                           folder / f"{shard_id}.parquet")
    state = {"shard_size": 5, "shards": [{"id": s, "docs": 5} for s in shards]}
    (folder / staging.STATE_FILE).write_text(json.dumps(state), encoding="utf-8")


def test_a_format_1_manifest_never_compacted_reads_and_upgrades_at_the_first_write(tmp_path, sample_docs,
                                                                                   make_chunks):
    index = _committed(tmp_path, sample_docs, make_chunks, n_shards=2)
    _rewrite(index.path, format=1, merged_shards=None)
    reopened = Index.open(index.path)
    assert reopened.finished_shards() == {"src-00000", "src-00001"} and reopened.manifest.merged_shards == []
    assert _on_disk(index.path)["format"] == 1  # reading writes nothing
    assert reopened.delete(doc_ids=[sample_docs[0]["_id"]]) == 1
    raw = _on_disk(index.path)
    assert (raw["format"], raw["merged_shards"], raw["generation"]) == (2, [], 3)


def test_the_shards_an_earlier_compaction_merged_are_recovered_from_the_staging(tmp_path, sample_docs, make_chunks):
    index = _committed(tmp_path, sample_docs, make_chunks, n_shards=3)
    index.delete(doc_ids=[sample_docs[6]["_id"]])  # a deleted document was ingested all the same
    index.compact()
    _stage(index, {"src-00000": None,  # committed, its staged file deleted
                   "src-00001": sample_docs[5:10],  # committed, the run died before deleting its staged file
                   "src-00002": None,
                   "src-00003": sample_docs[15:20]})  # staged, never committed
    _rewrite(index.path, format=1, merged_shards=None)

    reopened = Index.open(index.path)
    assert reopened.manifest.merged_shards == ["src-00000", "src-00002"]  # src-00001: d6 is gone from the index
    index.commit([index.write_shard("src-00004", make_chunks(sample_docs[20:25]))])
    assert _on_disk(index.path)["merged_shards"] == ["src-00000", "src-00002"]
    assert "src-00003" not in Index.open(index.path).finished_shards()


def test_a_staged_shard_whose_documents_are_all_in_the_index_was_merged(tmp_path, sample_docs, make_chunks):
    index = _committed(tmp_path, sample_docs, make_chunks, n_shards=2)
    index.compact()
    _stage(index, {"src-00000": sample_docs[0:5], "src-00001": sample_docs[5:10], "src-00002": sample_docs[10:15]})
    _rewrite(index.path, format=1, merged_shards=None)
    assert Index.open(index.path).manifest.merged_shards == ["src-00000", "src-00001"]


def test_a_recovery_is_not_redone_at_each_read_until_the_manifest_or_staging_changes(tmp_path, sample_docs,
                                                                                      make_chunks):
    from operators.store.shard import DOCS_FILE

    index = _committed(tmp_path, sample_docs, make_chunks, n_shards=2)
    index.compact()
    _stage(index, {"src-00000": sample_docs[0:5], "src-00001": sample_docs[5:10], "src-00002": sample_docs[10:15]})
    _rewrite(index.path, format=1, merged_shards=None)
    assert Index.open(index.path).manifest.merged_shards == ["src-00000", "src-00001"]  # reads the shards' doc ids
    [shard] = Index.open(index.path).manifest.shards
    docs = index.path / "shards" / shard.id / DOCS_FILE
    docs.rename(docs.with_name("away"))  # reading the shard's document ids again would fail
    try:
        for _ in range(3):
            assert Index.open(index.path).manifest.merged_shards == ["src-00000", "src-00001"]
    finally:
        docs.with_name("away").rename(docs)
    (index.path / staging.STAGING_DIR / "src" / "src-00002.parquet").unlink()  # its commit's last step, as if done
    assert Index.open(index.path).manifest.merged_shards == ["src-00000", "src-00001", "src-00002"]
    assert _on_disk(index.path)["format"] == 1  # reads wrote nothing


def test_a_later_format_is_refused_with_what_this_release_reads(tmp_path, sample_docs, make_chunks):
    index = _committed(tmp_path, sample_docs, make_chunks, n_shards=1)
    _rewrite(index.path, format=3)
    with pytest.raises(IndexCorruptError, match=r"format 3 is not supported \(this Tessera reads 1 and 2; a later "
                                                r"Tessera wrote it\): upgrade Tessera to use this index$"):
        Index.open(index.path)
