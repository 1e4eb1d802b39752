"""The ONNX export's folder is keyed by its recipe (export code version, options, exporting libraries), not by the
model alone: an export an older recipe made is never read as this one's."""

from __future__ import annotations

import importlib.util
from importlib.metadata import version

import pytest

from operators.models import sentence_transformers as st
from operators.models.onnx_query_encoder import FastPathUnavailable, load_onnx_query_encoder
from operators.models.references import ModelNotFoundError, resolve_model_path

MINILM = resolve_model_path("all-MiniLM-L6-v2")


def test_the_recipe_names_the_code_version_the_options_and_the_libraries():
    recipe = st.onnx_export_recipe()
    assert recipe["version"] == st.ONNX_EXPORT_VERSION and recipe["opset"] == st.ONNX_OPSET
    assert recipe["libraries"]["torch"] == version("torch")
    assert recipe["libraries"]["onnxruntime"] == version("onnxruntime")


def test_a_changed_recipe_exports_into_another_folder(export_home, monkeypatch):
    before = st.onnx_cache_dir(MINILM)
    assert before.name.startswith(f"{st.onnx_export_name(MINILM)}-onnx-") and before.parent == export_home / "models"
    with monkeypatch.context() as patch:
        patch.setattr(st, "ONNX_EXPORT_VERSION", st.ONNX_EXPORT_VERSION + 1)
        st.onnx_export_recipe.cache_clear()
        try:
            assert st.onnx_cache_dir(MINILM) != before
        finally:
            st.onnx_export_recipe.cache_clear()
    assert st.onnx_cache_dir(MINILM) == before


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime missing")
def test_an_export_keyed_by_the_model_only_is_not_read(export_home):
    from operators.models.fingerprint import model_fingerprint

    legacy = export_home / "models" / f"{MINILM.name}-onnx-{model_fingerprint(MINILM)}"
    legacy.mkdir(parents=True)
    (legacy / "model.onnx").write_bytes(b"an export of an older recipe")
    with pytest.raises(FastPathUnavailable, match="no ONNX export"):
        load_onnx_query_encoder("all-MiniLM-L6-v2")
    assert (legacy / "model.onnx").is_file(), "the old export is left where it was"


def test_export_folders_are_not_listed_as_models(export_home):
    st.onnx_cache_dir(MINILM).mkdir(parents=True)
    (export_home / "models" / "my-reranker").mkdir()
    with pytest.raises(ModelNotFoundError) as err:
        resolve_model_path("no-such-model")
    assert "my-reranker" in str(err.value) and "-onnx-" not in str(err.value)
