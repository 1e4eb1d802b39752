"""rerank.cross_encoder's Rust-tokenized pairs (operators/models/fast_tokens.py) against
``CrossEncoder.predict`` on a real checkpoint (the packaged MiniLM with a seeded head), over ten of
the Wikipedia passages that ship with the operators, one past the 512-token cut beside a long query
(truncated longest first), an empty text and windows of ``long_texts: max_window``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import operators
from operators import create
from operators.models.fast_tokens import PAIR_PROBES, FastTokenEncoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PASSAGES = Path(operators.__file__).parent / "testing_documents.jsonl"


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in PASSAGES.read_text(encoding="utf-8").splitlines()][:10]
    texts = [f"{row['title']}. {row['text']}" for row in rows]
    long_query = " ".join(texts[:2])
    return ([("which music was written in the 20th century?", text) for text in texts]
            + [(long_query, " ".join(texts[2:6])), ("bees", ""), ("bees", "bees")])


@pytest.mark.integration
def test_the_reranker_takes_the_fast_path_and_gives_predicts_logits(untrained_ce, pairs):
    import torch

    op = create("rerank.cross_encoder", {"model": str(untrained_ce), "predict_batch_size": 4})
    op.ensure_setup()
    assert isinstance(op._fast, FastTokenEncoder)
    expected = op.model.predict(pairs, batch_size=4, activation_fn=torch.nn.Identity(), convert_to_numpy=True)
    np.testing.assert_allclose(op._predict(pairs), expected.reshape(-1), atol=1e-5)


@pytest.mark.integration  # the untrained cross-encoder is built with torch
def test_pairs_are_tokenized_as_the_models_own_tokenizer_does(untrained_ce, pairs):
    from operators.models.cross_encoders import load_cross_encoder

    model = load_cross_encoder(str(untrained_ce), device="cpu", max_length=64)  # short: truncation everywhere
    fast = FastTokenEncoder.of(model, PAIR_PROBES)
    for start in range(0, len(pairs), 5):
        batch = pairs[start:start + 5]
        expected, produced = model.preprocess(batch), fast._features(batch)
        for name in ("input_ids", "token_type_ids", "attention_mask"):
            assert produced[name].tolist() == expected[name].tolist(), name


@pytest.mark.integration
def test_windows_of_long_candidates_score_as_before(untrained_ce, pairs):
    """long_texts: max_window builds its own (query, window) pairs; their best window is the candidate's score."""
    params = {"model": str(untrained_ce), "long_texts": "max_window", "max_length": 64, "predict_batch_size": 8}
    fast, library = create("rerank.cross_encoder", params), create("rerank.cross_encoder", params)
    fast.ensure_setup()
    library.ensure_setup()
    assert fast._fast is not None
    library._fast = None
    texts = [text for _, text in pairs[:4]]
    np.testing.assert_allclose(fast.score_texts("music of the 20th century", texts),
                               library.score_texts("music of the 20th century", texts), atol=1e-5)
