"""The embedding operator's Rust-tokenized encode (operators/models/fast_tokens.py) against
``SentenceTransformer.encode`` with the packaged MiniLM, on ten of the Wikipedia passages that ship
with the operators, three of them joined into one past MiniLM's 256-token cut, an empty text and
texts of equal length."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

import operators
from operators import create
from operators.models.fast_tokens import FastTokenEncoder

# Every test here loads MiniLM (4 CPU-seconds a process): make test runs them, make test-fast does not.
pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.integration]

PASSAGES = Path(operators.__file__).parent / "testing_documents.jsonl"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rows = [json.loads(line) for line in PASSAGES.read_text(encoding="utf-8").splitlines()]
    passages = [f"{row['title']}. {row['text']}" for row in rows][:10]  # ten keep the CPU encodes short
    return passages + [" ".join(passages[:3]), "", "bees", "bees", "honey bees dance"]


@pytest.fixture(scope="module")
def minilm():
    from operators.models import load_sentence_transformer

    return load_sentence_transformer(device="cpu")


def test_the_operator_takes_the_fast_path_and_gives_the_models_vectors_in_input_order(texts, minilm):
    op = create("embed", {"encode_batch_size": 8})
    op.ensure_setup()
    assert isinstance(op._fast, FastTokenEncoder)
    vectors = op.encode(texts)
    expected = minilm.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    assert vectors.shape == expected.shape == (len(texts), 384)
    np.testing.assert_allclose(vectors, expected, atol=2e-6)


def test_its_tokens_are_the_models_own_for_every_batch(texts, minilm):
    """Truncation at the model's length and padding to each batch's longest text, as the model's tokenizer does."""
    fast = FastTokenEncoder.of(minilm)
    long_texts = sorted(texts, key=len, reverse=True)
    assert len(minilm.tokenizer(long_texts[0])["input_ids"]) > minilm.max_seq_length  # truncation is exercised
    for start in range(0, len(long_texts), 16):
        batch = long_texts[start:start + 16]
        expected, produced = minilm.preprocess(batch), fast._features(batch)
        for name in ("input_ids", "token_type_ids", "attention_mask"):
            assert produced[name].tolist() == expected[name].tolist(), name


def test_unnormalised_vectors_and_a_shorter_truncation_match_too(texts):
    from operators.models import load_sentence_transformer

    model = load_sentence_transformer(device="cpu")  # the process's shared copy: put back as it was
    limit, model.max_seq_length = model.max_seq_length, 32
    try:
        fast = FastTokenEncoder.of(model)
        assert fast is not None
        expected = model.encode(texts[:12], batch_size=4, convert_to_numpy=True)
        np.testing.assert_allclose(fast.encode(texts[:12], 4, normalize=False), expected, atol=2e-6)
    finally:
        model.max_seq_length = limit


def test_a_tokenizer_it_does_not_reproduce_keeps_the_librarys_encode(texts):
    """Left padding is set on the transformers tokenizer, not in its Rust copy: the probe tells them apart."""
    from operators.models import load_sentence_transformer

    model = copy.deepcopy(load_sentence_transformer(device="cpu"))  # not the process's shared copy: setting the
    model.tokenizer.padding_side = "left"  # side back does not give back the Rust tokenizer's own padding
    assert FastTokenEncoder.of(model) is None


def test_batches_tokenized_ahead_on_a_thread_come_in_order(texts, minilm):
    """What a GPU runs: the next batch tokenized while the current one is embedded."""
    fast = FastTokenEncoder.of(minilm)
    batches = [(texts[i:i + 5], None) for i in range(0, len(texts), 5)]  # (texts, no pieces)
    ahead = list(fast._batch_features(batches, overlap=True))
    in_turn = list(fast._batch_features(batches, overlap=False))
    assert len(ahead) == len(in_turn) == len(batches)
    for a, b in zip(ahead, in_turn):
        assert a["input_ids"].tolist() == b["input_ids"].tolist()


def test_a_model_without_a_length_limit_keeps_the_librarys_encode():
    from operators.models import load_sentence_transformer

    model = load_sentence_transformer(device="cpu")  # the process's shared copy: put back as it was
    limit, model.max_seq_length = model.max_seq_length, None
    try:
        assert FastTokenEncoder.of(model) is None
    finally:
        model.max_seq_length = limit
