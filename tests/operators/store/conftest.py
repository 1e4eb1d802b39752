"""Fixtures of the index tests: the sample corpus, chunk tables, cached MiniLM vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "sample" / "corpus.jsonl"


@pytest.fixture(scope="session")
def sample_docs() -> list[dict]:
    """The 1,000 wiki documents of data/sample/corpus.jsonl (_id, title, text)."""
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def make_chunks():
    """``make_chunks(docs, dim=None, seed=0, vectors=None)``: one chunk per doc (docno = doc_id = _id),
    with random unit vectors of ``dim`` (or the given vectors) when dim is set."""
    from operators.embed.sentence_transformer import vectors_to_arrow

    def make(docs: list[dict], dim: int | None = None, seed: int = 0, vectors: np.ndarray | None = None,
             **extra) -> pa.Table:
        columns = {"docno": [d["_id"] for d in docs], "doc_id": [d["_id"] for d in docs],
                   "title": [d.get("title", "") for d in docs], "text": [d["text"] for d in docs], **extra}
        if vectors is None and dim:
            vectors = _unit(np.random.default_rng(seed), len(docs), dim)
        if vectors is not None:
            columns["vector"] = vectors_to_arrow(vectors)
        return pa.table(columns)

    return make


@pytest.fixture
def commit_unchecked():
    """``commit_unchecked(index, shard_id, chunks)``: write and commit a shard as code from before commits checked
    metadata column types did (so bypassing that check); returns its ``ShardInfo``."""
    from operators.store.layout import file_lock, read_manifest, write_manifest

    def commit(index, shard_id: str, chunks: pa.Table):
        info = index.write_shard(shard_id, chunks)
        with file_lock(index.path):
            manifest = read_manifest(index.path)
            manifest.shards.append(info)
            manifest.generation += 1
            write_manifest(index.path, manifest)
        return info

    return commit


@pytest.fixture(scope="session")
def minilm_title_vectors(sample_docs) -> np.ndarray:
    """Real all-MiniLM-L6-v2 vectors of the sample corpus titles (normalised), computed once per session
    (titles are short: a few seconds)."""
    from operators.models import load_sentence_transformer

    model = load_sentence_transformer("all-MiniLM-L6-v2")
    return model.encode([d["title"] for d in sample_docs], batch_size=128, normalize_embeddings=True,
                        convert_to_numpy=True, show_progress_bar=False).astype(np.float32)


@pytest.fixture(scope="session", autouse=True)
def _one_faiss_thread():
    """FAISS's OpenMP threads spin on a loaded 2-core machine (PQ training: 20 s instead of 1 s);
    the index tests run it on one thread and restore the setting afterwards."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)
