"""operators.models.batching: the batch size of a forward pass when the params leave it unset."""

from __future__ import annotations

import types

import pytest

from operators.models.batching import ACCELERATOR_BATCH, CPU_BATCH, forward_batch_size


def test_unset_follows_the_devices_a_model_reports_and_a_set_size_wins():
    on_cpu = types.SimpleNamespace(device="cpu")
    assert forward_batch_size(None, on_cpu) == CPU_BATCH == 16
    assert forward_batch_size(48, on_cpu) == 48
    on_gpu = types.SimpleNamespace(device="cuda:0")  # what a torch model on a GPU reports
    assert forward_batch_size(None, on_gpu) == ACCELERATOR_BATCH == 128
    assert forward_batch_size(None, object()) == CPU_BATCH  # no device attribute: CPU


@pytest.mark.integration  # loads MiniLM
def test_a_real_models_device_is_read_as_cpu():
    from operators.models import load_sentence_transformer

    minilm = load_sentence_transformer(device="cpu")
    assert forward_batch_size(None, minilm) == CPU_BATCH
    assert forward_batch_size(48, minilm) == 48
