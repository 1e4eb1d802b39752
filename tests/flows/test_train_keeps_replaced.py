"""A retrained checkpoint never deletes the one it replaces: that one is renamed aside, named by its config key, once
the new one is complete, and the line before training says where it goes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.train import checkpoints
from flows.train.checkpoints import TRAINING_FILE, replacement_note, trained_models, write_checkpoint


def _save(weights: bytes):
    def save(tmp: Path) -> dict:
        tmp.mkdir(parents=True)
        (tmp / "model.safetensors").write_bytes(weights)
        return {"steps": 1}
    return save


def _train(folder: Path, key: str, weights: bytes, key_inputs: dict) -> str:
    """What ``_train_one`` does around its trainer: the note, then the checkpoint written with the old one kept."""
    previous = checkpoints.read_record(folder)
    note, aside = replacement_note(folder, previous, key_inputs)
    write_checkpoint(folder, _save(weights), {"kind": "cross-encoder", "name": folder.name, "config_key": key,
                                              "key_inputs": key_inputs}, keep_previous=aside)
    return note


def test_a_retrain_with_another_key_keeps_the_old_checkpoint_beside_the_new(tmp_path):
    folder = tmp_path / "tessera-cross-encoder"
    first = {"kind": "cross-encoder", "params": {"lr": 1e-5}}
    assert _train(folder, "a" * 64, b"seventy minutes of training", first) == ""
    note = _train(folder, "b" * 64, b"a mistake", {"kind": "cross-encoder", "params": {"lr": 2e-5}})
    kept = tmp_path / f"tessera-cross-encoder-previous-{'a' * 12}"
    assert note == f" (replacing the checkpoint there: params.lr changed; the old one is kept as {kept.name})"
    assert (kept / "model.safetensors").read_bytes() == b"seventy minutes of training"
    assert json.loads((kept / TRAINING_FILE).read_text())["config_key"] == "a" * 64
    assert (folder / "model.safetensors").read_bytes() == b"a mistake"
    assert {row["name"] for row in trained_models(tmp_path)} == {folder.name, kept.name}  # --list shows both


def test_force_keeps_it_too_and_a_second_copy_of_the_same_key_gets_its_own_name(tmp_path):
    folder = tmp_path / "m"
    inputs = {"kind": "bi-encoder", "params": {}}
    _train(folder, "c" * 64, b"one", inputs)
    assert replacement_note(folder, None, inputs)[0] == \
        " (replacing the checkpoint there: --force; the old one is kept as m-previous-cccccccccccc)"
    _train(folder, "c" * 64, b"two", inputs)
    _train(folder, "c" * 64, b"three", inputs)
    assert (tmp_path / "m-previous-cccccccccccc" / "model.safetensors").read_bytes() == b"one"
    assert (tmp_path / "m-previous-cccccccccccc-2" / "model.safetensors").read_bytes() == b"two"
    assert (folder / "model.safetensors").read_bytes() == b"three"


def test_a_failed_run_leaves_the_old_checkpoint_in_place(tmp_path):
    folder = tmp_path / "m"
    _train(folder, "d" * 64, b"good", {"params": {}})
    _, aside = replacement_note(folder, None, {"params": {}})

    def fails(tmp: Path) -> dict:
        tmp.mkdir()
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        write_checkpoint(folder, fails, {"config_key": "e" * 64}, keep_previous=aside)
    assert (folder / "model.safetensors").read_bytes() == b"good" and not aside.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
