"""operators.models.batching: the batch size of a forward pass when the params leave it unset."""

from __future__ import annotations

import types

from operators.models import load_sentence_transformer
from operators.models.batching import ACCELERATOR_BATCH, CPU_BATCH, forward_batch_size


def test_unset_follows_the_models_device_and_a_set_size_wins():
    minilm = load_sentence_transformer(device="cpu")
    assert forward_batch_size(None, minilm) == CPU_BATCH == 16
    assert forward_batch_size(48, minilm) == 48
    on_gpu = types.SimpleNamespace(device="cuda:0")  # what a torch model on a GPU reports
    assert forward_batch_size(None, on_gpu) == ACCELERATOR_BATCH == 128
    assert forward_batch_size(None, object()) == CPU_BATCH  # no device attribute: CPU
