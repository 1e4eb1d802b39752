"""A static embedding model (a ``StaticEmbedding`` sentence-transformers folder, what ``tessera train --model
static`` saves) through embed.sentence_transformer: loaded by path, large forward batches, torch only.

The model here is built in a second from MiniLM's tokenizer and seeded random token vectors: the operator's
handling does not depend on what the vectors mean (the distilled model's quality is measured in
docs/results.md)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from operators import create
from operators.embed.sentence_transformer import arrow_to_vectors
from operators.models import load_sentence_transformer
from operators.models.batching import STATIC_BATCH, forward_batch_size, is_static
from operators.models.sentence_transformers import BackendNotAvailableError

# Each test builds and loads a torch model (sentence-transformers and torch's imports, 4-5 CPU-seconds a process):
# make test runs them, make test-fast does not.
pytestmark = pytest.mark.integration


def test_a_static_model_embeds_through_the_operator_with_large_forward_batches(static_folder):
    table = pa.table({"docno": ["d1", "d2", "d3"], "text": ["honey bees", "bees make honey", "stock markets"]})
    vectors = arrow_to_vectors(create("embed", {"model": str(static_folder)})(table).column("vector"))
    assert vectors.shape == (3, 16)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    model = load_sentence_transformer(str(static_folder), device="cpu")
    assert is_static(model) and not is_static(load_sentence_transformer(device="cpu"))
    assert forward_batch_size(None, model) == STATIC_BATCH
    # the mean of the tokens' vectors: the same words in any order give the same vector
    again = arrow_to_vectors(create("embed", {"model": str(static_folder)})(
        pa.table({"text": ["honey bees", "honey bees make"]})).column("vector"))
    np.testing.assert_allclose(again[0], vectors[0], atol=1e-6)
    np.testing.assert_allclose(again[1], vectors[1], atol=1e-6)


def test_the_bags_of_pieces_give_the_models_own_vectors(static_folder):
    """The fast path (each distinct space-separated piece tokenized once) against ``model.encode``
    on real passages and edge cases: empty text, runs of spaces, tabs, final sigma, CJK, accents,
    and a text over the tokenizer's 512-token truncation (encoded by the model itself)."""
    import json
    from pathlib import Path

    sample = Path(__file__).resolve().parents[3] / "data" / "sample" / "corpus.jsonl"
    with open(sample, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line, _ in zip(f, range(300))]
    texts += ["", "   ", "  two  spaces ", "tab\tand\nnewline", "ΟΔΟΣ Σ σ", "日本語のテキスト test", "Café naïve",
              "word, " * 400, "x"]
    op = create("embed", {"model": str(static_folder)})
    op.ensure_setup()
    assert op._static is not None
    fast = op.encode(texts)
    exact = load_sentence_transformer(str(static_folder), device="cpu").encode(texts, normalize_embeddings=True)
    empty = texts.index("")
    assert not fast[empty].any()  # the zero vector, where the model's EmbeddingBag gives NaN
    np.testing.assert_allclose(np.delete(fast, empty, 0), np.delete(exact, empty, 0), atol=1e-5)
    # later batches take most pieces' token ids from the cache, and give the same vectors
    assert len(op._static.cache.slots) > 0
    np.testing.assert_allclose(np.concatenate([op.encode(texts[150:]), op.encode(texts[:150])]),
                               np.concatenate([fast[150:], fast[:150]]), atol=1e-6)  # sums in another order


def test_an_onnx_backend_or_half_precision_for_a_static_model_is_refused_with_the_reason(static_folder):
    with pytest.raises(BackendNotAvailableError, match="static embedding model.*backend 'onnx' does not apply.*"
                                                       "use backend 'torch'"):
        load_sentence_transformer(str(static_folder), backend="onnx")
    with pytest.raises(BackendNotAvailableError, match="static embedding model.*dtype 'float16' does not apply"):
        load_sentence_transformer(str(static_folder), dtype="float16")
