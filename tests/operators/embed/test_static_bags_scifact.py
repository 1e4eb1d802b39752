"""The static embedder's bags of pieces against the model's own encode on real SciFact abstracts,
for a float16 table (what model2vec's ``distill`` and so ``tessera train --model static`` save)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from operators import create

pytestmark = [pytest.mark.data, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture(scope="module")
def half_static_folder(tmp_path_factory):
    """A static model as training saves one: MiniLM's tokenizer, float16 token vectors (seeded, 32-d)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding
    from tokenizers import Tokenizer

    from operators.models import resolve_model_path

    tokenizer = Tokenizer.from_file(str(resolve_model_path("minilm") / "tokenizer.json"))
    tokenizer.enable_truncation(512)  # as a distilled model's tokenizer.json holds it
    weights = np.random.default_rng(1).standard_normal((tokenizer.get_vocab_size(), 32)).astype(np.float16)
    folder = tmp_path_factory.mktemp("static16") / "half-static"
    SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights), Normalize()],
                        device="cpu").save(str(folder))
    return folder


def test_scifact_abstracts_get_the_models_vectors_in_float32_long_ones_included(shared_data, half_static_folder):
    """Short abstracts (bags of pieces) and those over the 512-token cut (the model's truncating
    tokenizer) equal ``model.float().encode``; ``model.encode`` sums the float16 table in float16,
    which docs/results.md measures (cosine 0.9996-1.0, SciFact nDCG@10 0.3968 vs 0.3959)."""
    from operators.models import load_sentence_transformer

    with open(shared_data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line) for line, _ in zip(f, range(1500))]
    texts = [f"{d['title']}. {d['text']}" if d.get("title") else d["text"] for d in docs]
    model = load_sentence_transformer(str(half_static_folder), device="cpu")
    assert model[0].embedding.weight.dtype.is_floating_point and model[0].embedding.weight.element_size() == 2
    untruncated = model[0].tokenizer.from_str(model[0].tokenizer.to_str())
    untruncated.no_truncation()
    lengths = np.array([len(e.ids) for e in untruncated.encode_batch(texts, add_special_tokens=False)])
    long = np.flatnonzero(lengths > 512)
    assert len(long) > 50  # one SciFact abstract in eleven is over the cut
    chosen = sorted(set(range(300)) | set(long[:100].tolist()))
    sample = [texts[i] for i in chosen]

    op = create("embed", {"model": str(half_static_folder)})
    op.ensure_setup()
    assert op._static is not None
    fast = op.encode(sample)
    exact = model.float().encode(sample, normalize_embeddings=True, convert_to_numpy=True)
    assert np.allclose(fast, exact, atol=1e-6), np.abs(fast - exact).max()
    is_long = lengths[chosen] > 512
    assert is_long.sum() == 100 and (~is_long).sum() > 200
