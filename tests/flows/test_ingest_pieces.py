"""An ingestion whose chunker counts the encoder's own pieces hands them to the encoder (``shards._pieces_fit``),
which then does not tokenize the chunks again: the vectors stored are the model's own of ``title. chunk``, and the
piece ids are never written into the index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import operators
from flows.ingestion import ingest
from flows.ingestion.shards import ShardJob, _pieces_fit
from flows.spec import FlowSpec
from operators.store import Index

PASSAGES = Path(operators.__file__).parent / "testing_documents.jsonl"
CHUNK = {"unit": "tokens", "size": 64, "overlap": 8, "tokenizer": "all-MiniLM-L6-v2"}


@pytest.mark.parametrize("chunk, embed, placement, fit", [
    (CHUNK, {"title_column": "title"}, None, True),
    (CHUNK, {"title_column": "title", "model": "all-MiniLM-L6-v2"}, None, True),
    ({**CHUNK, "tokenizer": None}, {}, None, False),  # regex tokens: no pieces
    (CHUNK, None, None, False),  # BM25 only: nothing to embed
    (CHUNK, {"prompt": "passage: "}, None, False),  # the prompt's pieces are not in them
    (CHUNK, {"input_column": "summary"}, None, False),  # another column than the chunks'
    (CHUNK, {}, {"deployment": "all-MiniLM-L6-v2", "app": "tessera"}, False),  # encoded on a Serve deployment
    (CHUNK, {"model": "no-such-model"}, None, False),  # the embed step says what is missing, not this
])
def test_pieces_go_to_the_encoder_only_when_they_are_its_own(chunk, embed, placement, fit):
    job = ShardJob(index_path="unused", chunk=chunk, embed=embed, embed_placement=placement)
    assert _pieces_fit(job) is fit


def test_a_model_with_another_tokenizer_gets_no_pieces(tmp_path):
    import json

    from operators.models import resolve_model_path
    from operators.preprocess._model_windows import model_tokenizer

    minilm = resolve_model_path("all-MiniLM-L6-v2")
    for name in ("config.json", "modules.json"):  # a model folder, its tokenizer cased
        (tmp_path / name).write_bytes((minilm / name).read_bytes())
    spec = json.loads(model_tokenizer("all-MiniLM-L6-v2").to_str())
    spec["normalizer"]["lowercase"] = False  # a cased model: other pieces for the same text
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    job = ShardJob(index_path="unused", chunk=CHUNK, embed={"model": str(tmp_path)})
    assert not _pieces_fit(job)
    assert _pieces_fit(ShardJob(index_path="unused", chunk={**CHUNK, "tokenizer": str(tmp_path)},
                                embed={"model": str(tmp_path)}))  # the chunks counted in its own pieces


@pytest.mark.integration
@pytest.mark.usefixtures("one_torch_thread")
def test_the_stored_vectors_are_the_models_own_and_the_pieces_are_not_stored(tmp_path):
    spec = FlowSpec.load("ingest").to_dict()
    spec["steps"]["chunk"]["params"] = CHUNK  # several chunks a document
    ingest(PASSAGES, tmp_path / "idx", spec=spec, shard_size=20, executor="local", progress=False)
    index = Index.open(tmp_path / "idx")
    shards = [tmp_path / "idx" / "shards" / s.id for s in index.manifest.shards]
    docs = [pq.read_table(shard / "docs.parquet") for shard in shards]
    assert all("_pieces" not in table.column_names for table in docs)
    from operators.models import load_sentence_transformer

    model = load_sentence_transformer(device="cpu")
    import faiss

    for shard, table in zip(shards, docs):
        flat = faiss.read_index(str(shard / "dense.faiss"))  # a flat index: row i is the shard's i-th chunk
        joined = [f"{title}. {text}" for title, text in zip(table.column("title").to_pylist(),
                                                             table.column("text").to_pylist())]
        expected = model.encode(joined, normalize_embeddings=True)
        assert table.num_rows > 20 and np.allclose(flat.reconstruct_n(0, flat.ntotal), expected, atol=1e-5)
