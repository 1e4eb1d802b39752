"""A step's ``params.model`` naming a model of another kind is refused before any step runs, naming the step, the
field and the kind the step loads: a language model's alias (``local``) for a cross-encoder or an embedder, a
bi-encoder or a cross-encoder for ``rerank.colbert``, a bi-encoder for a cross-encoder inside
``retrieve.multi_collection``'s postprocessors, an object where a name belongs. Before, the alias was "not on this
machine" without a word of its kind, ColBERT's model was refused only when its step loaded it (after the retrieval
before it) and a nested cross-encoder was not checked at all. ``tessera run`` on a real BM25 index, in-process; the
step cache (on) stays empty, so no step ran. The service's answers are tests/serve/test_wrong_model_kind.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.text_checks import TRACEBACK

BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}


def postprocessed(post: dict) -> dict:
    """``retrieve.multi_collection`` over the index, ``post`` as its one postprocessor."""
    return {"m": {"op": "retrieve.multi_collection", "params": {"collections": [{"name": "a"}], "postprocess": [post]}}}


@pytest.fixture
def index(tmp_path):
    from operators.store import Index, IndexSettings

    folder = Index.create(tmp_path / "index", IndexSettings(dense=False))
    folder.add(pa.table({"docno": ["bees#0", "ants#0"], "doc_id": ["bees", "ants"], "title": ["Bees", "Ants"],
                         "text": ["honey bees make honey from nectar", "ants farm aphids for honeydew"]}))
    return folder.path


def run_spec(tmp_path, monkeypatch, capsys, index, steps: dict) -> tuple[int, str]:
    import yaml

    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    given = ["--index", str(index)]
    for step in steps.values():  # multi_collection's collections name the index themselves
        for collection in step["params"].get("collections", []):
            collection["index"], given = str(index), []
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "kinds", "steps": steps}))
    capsys.readouterr()
    status = main(["run", str(spec), *given, "--queries", "honey bees", "--cache-dir", str(tmp_path / "cache")])
    return status, capsys.readouterr().err


def ran_nothing(tmp_path) -> bool:
    cache = tmp_path / "cache"
    return not cache.exists() or not any(path.is_file() for path in cache.rglob("*"))


@pytest.mark.parametrize("steps, says", [
    ({"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": "local"}}},
     ["'local' for flow kinds, step ce (params.model): not a cross-encoder: 'local' names a language model",
      "this step loads a cross-encoder"]),
    ({"bm25": BM25, "emb": {"op": "embed.sentence_transformer", "params": {"model": "gemma2"}}},
     ["step emb (params.model): not a sentence embedding model: 'gemma2' names a language model"]),
    ({"bm25": BM25, "cb": {"op": "rerank.colbert", "params": {"model": "all-MiniLM-L6-v2"}}},
     ["step cb (params.model): not a ColBERT model:", "is a sentence embedding model (a bi-encoder"]),
    (postprocessed({"op": "rerank.cross_encoder", "params": {"model": "all-MiniLM-L6-v2"}}),
     ["step m (params.postprocess.0.params.model): not a cross-encoder:", "no sequence-classification head"]),
    ({"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": {"name": "tessera-cross-encoder"}}}},
     ["step 'ce', operator 'rerank.cross_encoder', field 'steps.ce.params.model': ",  # then the spec's file and line
      "spec.yaml, line 10: must be a string (got {'name': 'tessera-cross-encoder'})",
      "model takes a name, not a mapping: CrossEncoder reference"]),
], ids=["alias-as-cross-encoder", "alias-as-embedder", "bi-encoder-as-colbert", "nested-bi-encoder-as-cross-encoder",
        "object-as-model"])
def test_a_model_of_another_kind_is_refused_before_any_step_runs(tmp_path, monkeypatch, capsys, index, steps, says):
    status, err = run_spec(tmp_path, monkeypatch, capsys, index, steps)
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tessera: error: ") and TRACEBACK not in err, err
    for words in says:
        assert words in err, err
    assert ran_nothing(tmp_path)


@pytest.fixture(scope="module")
def colbert_checkpoint(tmp_path_factory) -> Path:
    """A checkpoint of Tessera's own ColBERT layout (the packaged MiniLM with a seeded, untrained projection)."""
    from operators.models.colbert import new_colbert

    return Path(new_colbert("minilm").save(tmp_path_factory.mktemp("models") / "colbert"))


def colbert_flow(model: str):
    from flows.spec import FlowSpec

    return FlowSpec.parse({"name": "cb", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": "x"}},
                                                   "cb": {"op": "rerank.colbert", "params": {"model": model}}}})


def test_colbert_is_checked_from_its_files_a_cross_encoder_refused_a_colbert_checkpoint_passed(untrained_ce,
                                                                                             colbert_checkpoint):
    from flows.model_check import MissingModelsError, check_models

    with pytest.raises(MissingModelsError, match="not a ColBERT model: .* is a cross-encoder") as raised:
        check_models([colbert_flow(str(untrained_ce))])
    assert [need.field for need in raised.value.wrong_kind] == ["steps.cb.params.model"]
    check_models([colbert_flow(str(colbert_checkpoint))])  # Tessera's own layout passes


def test_a_colbert_checkpoint_of_a_later_format_is_refused_before_any_step_runs(tmp_path, colbert_checkpoint):
    """It was refused only when its step loaded it, after the retrieval before it (through the service, at a
    replica's start)."""
    import json
    import os
    import shutil

    from flows.model_check import MissingModelsError, check_models
    from operators.models.colbert_checks import CONFIG_FILE

    later = shutil.copytree(colbert_checkpoint, tmp_path / "later", copy_function=os.link)  # the weights shared
    config = json.loads((later / CONFIG_FILE).read_text())
    (later / CONFIG_FILE).unlink()  # a file of its own, not the checkpoint's changed
    (later / CONFIG_FILE).write_text(json.dumps({**config, "format": "tessera-colbert/2"}))
    with pytest.raises(MissingModelsError) as raised:
        check_models([colbert_flow(str(later))])
    assert "has format 'tessera-colbert/2', which a later Tessera saved (this one reads 'tessera-colbert/1')" in str(
        raised.value)
    assert "not a ColBERT model" not in str(raised.value)
    assert [need.field for need in raised.value.wrong_kind] == ["steps.cb.params.model"]
    assert "'later' has format" in raised.value.public and str(tmp_path) not in raised.value.public
    check_models([colbert_flow(str(colbert_checkpoint))])  # the checkpoint it was copied from is untouched
