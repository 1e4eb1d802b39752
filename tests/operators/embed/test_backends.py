"""Embedding backends: the ONNX export matches torch on real sample texts; unavailable backends say why."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from operators import create
from operators.embed.sentence_transformer import arrow_to_vectors
from operators.models import load_sentence_transformer
from operators.models.sentence_transformers import BackendNotAvailableError, onnx_cache_dir, resolve_model_path
from operators.testing import SAMPLE_SENTENCES, sample_documents

ONNX_MISSING = [m for m in ("onnx", "onnxruntime", "onnxscript") if importlib.util.find_spec(m) is None]
needs_onnx = pytest.mark.skipif(bool(ONNX_MISSING), reason=f"ONNX backend not installed ({', '.join(ONNX_MISSING)} "
                                "missing): reinstall Tessera, whose base install has them")


@pytest.fixture(scope="module")
def onnx_home(tmp_path_factory):
    """A private TESSERA_HOME, so the test exercises the export and never touches ~/.tessera."""
    home = tmp_path_factory.mktemp("tessera_home")
    patch = pytest.MonkeyPatch()
    patch.setenv("TESSERA_HOME", str(home))
    yield home
    patch.undo()


def texts() -> list[str]:
    docs = sample_documents(24).to_pylist()
    return [f"{d['title']}. {d['text']}" for d in docs] + list(SAMPLE_SENTENCES.values()) + ["bees", ""]


@needs_onnx
@pytest.mark.slow
def test_onnx_vectors_match_torch_and_the_export_is_cached(onnx_home):
    sentences = texts()
    torch_vectors = load_sentence_transformer(backend="torch").encode(sentences, normalize_embeddings=True)
    model = load_sentence_transformer(backend="onnx")
    assert type(model[0].model).__name__ == "OnnxTransformer"
    onnx_vectors = model.encode(sentences, normalize_embeddings=True, batch_size=8)
    cosine = np.sum(torch_vectors * onnx_vectors, axis=1)
    assert cosine.min() >= 0.999, f"least similar text: {sentences[int(cosine.argmin())][:60]!r} ({cosine.min():.5f})"
    folder = onnx_cache_dir(resolve_model_path("all-MiniLM-L6-v2"))
    assert folder.parent.parent == onnx_home and (folder / "model.onnx").is_file()
    assert not [p for p in folder.iterdir() if p.name.startswith(".")], "a partial export was left behind"


@needs_onnx
@pytest.mark.slow
def test_embed_operator_runs_the_onnx_backend(onnx_home):
    table = sample_documents(6)
    torch_out = arrow_to_vectors(create("embed", {"title_column": "title"})(table).column("vector"))
    onnx_out = arrow_to_vectors(create("embed", {"title_column": "title", "backend": "onnx"})(table).column("vector"))
    assert onnx_out.shape == (6, 384)
    assert np.sum(torch_out * onnx_out, axis=1).min() >= 0.999


def test_unavailable_backends_say_what_to_do():
    with pytest.raises(BackendNotAvailableError, match="optimum-intel"):
        load_sentence_transformer(backend="openvino")
    with pytest.raises(BackendNotAvailableError, match="runs on CPU"):
        load_sentence_transformer(backend="onnx", device="cuda")
    with pytest.raises(BackendNotAvailableError, match="unknown backend"):
        load_sentence_transformer(backend="tensorrt")
