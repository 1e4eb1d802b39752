"""``onnx_query_encoder.stated_dimension``: an ingestion's driver learns the vectors' dimension from the model
folder, without loading the model, where the folder states it plainly; else it loads the model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from operators.embed.sentence_transformer import SentenceTransformerEmbedder
from operators.models import resolve_model_path
from operators.models.onnx_query_encoder import stated_dimension

REPO = Path(__file__).resolve().parents[3]


def test_minilm_states_384():
    assert stated_dimension("all-MiniLM-L6-v2") == 384


@pytest.mark.integration
def test_it_is_the_loaded_models_dimension():
    op = SentenceTransformerEmbedder({"model": "all-MiniLM-L6-v2"}, step_id="embed")
    assert stated_dimension("all-MiniLM-L6-v2") == op.dimension == op._model.get_embedding_dimension()


def test_a_dense_layer_is_not_read_from_files(tmp_path: Path):
    """A Dense module after the pooling changes the dimension: the folder is not read, the model decides."""
    folder = tmp_path / "minilm-dense"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), folder,
                    ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx"))
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "2_Dense").mkdir()
    (folder / "2_Dense" / "config.json").write_text(json.dumps({"in_features": 384, "out_features": 128}))
    assert stated_dimension(str(folder)) is None


def test_a_missing_model_is_left_to_the_loading_error(tmp_path: Path):
    assert stated_dimension(str(tmp_path / "absent")) is None


@pytest.mark.process
def test_checking_an_ingestion_loads_no_model(tmp_path: Path):
    """What ``tessera ingest`` checks before it stages (the index's dimension among it) imports no torch."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "title": "Rivers", "text": "The Rhine flows north."}) + "\n")
    code = ("import sys\n"
            "from flows.ingestion.checks import check_ingest\n"
            f"checked = check_ingest({str(corpus)!r}, {str(tmp_path / 'idx')!r}, spec='ingest', executor='ray')\n"
            "print(checked.settings.dim, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["384", "False", "False"]
