"""``tessera models prune`` in a home copied or moved elsewhere: an ONNX export's ``source.json`` names the model it
was made from whole, in the old home. Judged by that folder, the current export of the copy's model was listed (and
removed with ``--yes``) once the old home's model was retrained, and, with the old home gone, an export the copy's
own retraining made stale was never listed. Real folders made by Tessera's own writers (``write_checkpoint``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.flows.test_cli import tessera  # noqa: F401 - the fixture
from tests.flows.test_models_prune import _export, _train


def listed(tessera, home: Path) -> set[str]:  # noqa: F811
    return {Path(i["path"]).name for i in json.loads(tessera("models", "prune", "--json", home=home).stdout)["items"]}


def test_a_copied_home_judges_its_exports_by_its_own_models(tessera, tmp_path, monkeypatch):  # noqa: F811
    from operators.models.sentence_transformers import onnx_cache_dir

    old, new = tmp_path / "old-home", tmp_path / "new-home"
    monkeypatch.setenv("TESSERA_HOME", str(old))
    _train(old / "models" / "my-bi", "a" * 64, "first")
    export = _export(onnx_cache_dir(old / "models" / "my-bi"), old / "models" / "my-bi")
    shutil.copytree(old, new, symlinks=True)
    _train(old / "models" / "my-bi", "b" * 64, "second")  # the old home's model retrained; the copy's is as it was
    monkeypatch.setenv("TESSERA_HOME", str(new))
    assert export.name not in listed(tessera, new)  # the copy's current export: it was listed as stale
    assert (new / "models" / export.name / "model.onnx").is_file()

    shutil.rmtree(old)
    _train(new / "models" / "my-bi", "c" * 64, "third")  # the copy's own model retrained: its export is stale now
    assert export.name in listed(tessera, new)  # it was never listed: its source.json's folder is gone
