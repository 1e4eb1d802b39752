"""``tessera models prune``: lists the checkpoints ``tessera train`` kept aside and the ONNX exports no longer
read, with sizes, removes them only with ``--yes``, and never touches a current model, the current export or a
folder a user put there. Real folders under a temporary ``$TESSERA_HOME``, made by Tessera's own writers."""

from __future__ import annotations

import json
import re
from pathlib import Path

from flows.train.checkpoints import kept_as, write_checkpoint
from operators.byte_sizes import format_bytes
from tests.flows.test_cli import tessera  # noqa: F401 - the fixture


def _train(folder: Path, key: str, weights: str) -> None:
    """A checkpoint written by ``write_checkpoint`` (as tessera train does), keeping the one it replaces."""
    def save(tmp: Path) -> dict:
        tmp.mkdir(parents=True)
        (tmp / "config.json").write_text(json.dumps({"model_type": "bert"}))
        (tmp / "model.safetensors").write_bytes(weights.encode() * 1000)
        return {"steps": 1}

    write_checkpoint(folder, save, {"config_key": key}, keep_previous=kept_as(folder))


def _export(folder: Path, model: Path, size: int = 5000) -> Path:
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"\0" * size)
    (folder / "source.json").write_text(json.dumps({"model": str(model)}))
    return folder


def test_prune_lists_then_removes_only_what_nothing_reads(tessera, tmp_path, monkeypatch):  # noqa: F811
    from operators.models.fingerprint import model_fingerprint
    from operators.models.sentence_transformers import onnx_cache_dir

    home = tmp_path / "home"
    models = home / "models"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    model = models / "my-bi"
    _train(model, "a" * 64, "first")
    old_weights = model_fingerprint(model)
    stale_weights = _export(onnx_cache_dir(model), model)  # the export of the first weights
    _train(model, "b" * 64, "second")  # retrained: the first is kept aside, its export is never read again
    aside = models / f"my-bi-previous-{'a' * 12}"
    assert aside.is_dir() and stale_weights.name.startswith(f"my-bi-onnx-{old_weights}-")
    current = _export(onnx_cache_dir(model), model)
    old_layout = _export(models / f"my-bi-onnx-{old_weights}", model, 7000)  # before exports had a recipe
    other_recipe = _export(models / f"my-bi-onnx-{model_fingerprint(model)}-0badcafe", model)
    lock = models / f".{old_layout.name}.lock"  # export_query_encoder's file lock, beside its folder
    lock.touch()
    # a user's own folders, named like ours
    users = [models / "notes-previous-abcdefabcdef", models / f"theirs-onnx-{'1' * 16}",
             models / f"x-previous-{'c' * 12}"]
    users[0].mkdir()
    _export(users[1], model)
    (users[1] / "config.json").write_text("{}")
    users[2].mkdir()
    (users[2] / "training.json").write_text(json.dumps({"config_key": "d" * 64}))  # its key is not its name's

    listed = json.loads(tessera("models", "prune", "--json", home=home).stdout)
    assert listed["removed"] is False
    by_path = {Path(i["path"]).name: i for i in listed["items"]}
    assert set(by_path) == {aside.name, stale_weights.name, old_layout.name, other_recipe.name}
    assert by_path[aside.name]["kind"] == "kept-aside checkpoint" and by_path[aside.name]["bytes"] > 5000
    saved = json.loads((aside / "training.json").read_text())["saved_at"]  # its own date: not when it was put aside
    assert by_path[aside.name]["why"].endswith(f"was retrained (it was trained {saved})"), by_path[aside.name]
    assert by_path[old_layout.name]["bytes"] == 7000 + len((old_layout / "source.json").read_bytes())
    assert "recipe" in by_path[other_recipe.name]["why"] and "no longer has" in by_path[stale_weights.name]["why"]
    assert all(Path(i["path"]).is_dir() for i in listed["items"])  # listing removes nothing
    text = tessera("models", "prune", home=home).stdout
    assert "would remove" in text and aside.name in text and "tessera models prune --yes" in text
    assert f"total: 4 folders, {format_bytes(listed['bytes'])} (" in text and "KiB" in text
    assert not re.search(r"\d KB\b", text)  # binary units (a temporary path may hold the letters "KB")

    removed = json.loads(tessera("models", "prune", "--yes", "--json", home=home).stdout)
    assert removed["removed"] is True and len(removed["items"]) == 4
    assert not any(Path(i["path"]).exists() for i in listed["items"]) and not lock.exists()
    assert sorted(p.name for p in models.iterdir()) == sorted([model.name, current.name, *(u.name for u in users)])
    assert (model / "model.safetensors").read_bytes().startswith(b"second") and (current / "model.onnx").is_file()
    assert "nothing to prune" in tessera("models", "prune", home=home).stdout


def test_yes_without_prune_and_prune_with_names_are_refused(tessera, tmp_path):  # noqa: F811
    from tests.flows.test_cli import assert_one_line_error

    assert_one_line_error(tessera("models", "--yes", home=tmp_path, check=None), "--yes goes with")
    assert_one_line_error(tessera("models", "prune", "local", home=tmp_path, check=None), "only --yes and --json")
    # --check is named as what was given, not NAME
    assert_one_line_error(tessera("models", "prune", "--check", home=tmp_path, check=None), "field '--check'",
                          "only --yes and --json")


def test_an_export_named_after_the_folder_above_a_model_folder_is_listed_once_its_weights_change(tmp_path,
                                                                                                  monkeypatch):
    """A model whose folder is the generic ``model`` (a packaged model's ``<package>/model``) has its export named
    after ``<package>``; prune still tells when that export is of weights the folder no longer has, and still
    lists an older Tessera's ``model-onnx-...`` export of those weights."""
    from flows.train.prune import prunable
    from operators.models.fingerprint import model_fingerprint
    from operators.models.sentence_transformers import onnx_cache_dir, onnx_recipe_key

    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    model = tmp_path / "my_pkg" / "model"
    _train(model, "a" * 64, "first")
    first = _export(onnx_cache_dir(model), model)
    assert first.name.startswith(f"my_pkg-onnx-{model_fingerprint(model)}-")
    earlier = _export(home / "models" / f"model-onnx-{model_fingerprint(model)}-{onnx_recipe_key()}", model)
    assert {p.path.name for p in prunable(home / "models")} == set(), "exports of the current weights stay"
    _train(model, "b" * 64, "second")
    found = {p.path.name: p for p in prunable(home / "models")}
    assert set(found) == {first.name, earlier.name}
    assert all("no longer has" in p.why and p.kind == "stale ONNX export" for p in found.values())
