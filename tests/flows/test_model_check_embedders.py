"""A model a step embeds with is refused when it is a cross-encoder or a ColBERT model, before anything is written.

sentence-transformers loads either folder as an embedder without a word (a Transformer plus a mean pooling nobody
trained), so ``tessera index add --encoder tessera-cross-encoder`` used to build a dense index of meaningless vectors
and exit 0. Both checkpoints here are real ones, built cheaply from the packaged MiniLM.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flows.model_check import MissingModelsError, check_models
from flows.spec import FlowSpec
from tests.text_checks import TRACEBACK

# every test builds its checkpoints with torch (a cross-encoder, a ColBERT model): make test, not make test-fast
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def colbert_folder(tmp_path_factory) -> Path:
    """A ColBERT checkpoint in Tessera's layout (the packaged MiniLM with a seeded, untrained projection)."""
    from operators.models.colbert import new_colbert

    return Path(new_colbert("minilm").save(tmp_path_factory.mktemp("models") / "colbert"))


@pytest.fixture
def home(tmp_path, monkeypatch, untrained_ce, colbert_folder) -> Path:
    """A fresh ``$TESSERA_HOME`` whose model repository holds ``tessera-cross-encoder`` and ``tessera-colbert``."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    shutil.copytree(untrained_ce, tmp_path / "home" / "models" / "tessera-cross-encoder")
    shutil.copytree(colbert_folder, tmp_path / "home" / "models" / "tessera-colbert")
    return tmp_path / "home"


@pytest.mark.parametrize("model, kind", [("tessera-cross-encoder", "a cross-encoder"),
                                         ("tessera-colbert", "a ColBERT model")])
def test_index_add_refuses_an_encoder_that_is_not_an_embedding_model(home, tmp_path, capsys, model, kind):
    from flows.commands import main

    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"_id": "a", "text": "honey bees"}\n', encoding="utf-8")
    assert main(["index", "add", str(tmp_path / "index"), str(docs), "--encoder", model]) == 2
    err = capsys.readouterr().err
    assert f"is here but is {kind}" in err and "not the sentence embedding model this step needs" in err
    assert str(home / "models" / model) in err and TRACEBACK not in err
    assert not (tmp_path / "index").exists()  # nothing was created
    assert main(["index", "add", str(tmp_path / "index"), str(docs), "--encoder", "all-MiniLM-L6-v2"]) == 0


def test_ingest_refuses_a_cross_encoder_as_its_encoder_before_it_starts(home, tmp_path, capsys):
    from flows.commands import main

    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"_id": "a", "text": "honey bees"}\n', encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text("steps:\n  read: {op: sources.jsonl, params: {path: x.jsonl}}\n  embed: {op: embed, params: "
                    "{model: tessera-cross-encoder}}\nindex_settings: {encoder: tessera-cross-encoder}\n",
                    encoding="utf-8")
    command = ["ingest", "--index", str(tmp_path / "index"), "--executor", "local", "--quiet"]
    assert main([*command, "--source", str(docs), "--spec", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "are here but not of the kind their step needs, so nothing was run" in err
    assert "'tessera-cross-encoder' for flow ingest, step embed (params.model): not a sentence embedding model" in err
    assert not (tmp_path / "index").exists()


def test_flow_steps_that_embed_are_checked_for_the_kind_of_their_model(home):
    flow = FlowSpec.parse({"name": "kinds", "steps": {
        "embed": {"op": "embed.sentence_transformer", "params": {"model": "tessera-colbert"}},
        "rerank": {"op": "rerank.embedding", "params": {"model": "tessera-cross-encoder"}},
        "ce": {"op": "rerank.cross_encoder", "params": {"model": "tessera-cross-encoder"}}}})
    with pytest.raises(MissingModelsError) as raised:
        check_models([flow])
    # the cross-encoder is right for rerank.cross_encoder, wrong for the steps that embed
    assert {ref: [(n.step, n.kind) for n in needs] for ref, needs in raised.value.missing.items()} == {
        "tessera-colbert": [("embed", "sentence embedding model")],
        "tessera-cross-encoder": [("rerank", "sentence embedding model")]}
    assert str(raised.value).startswith("2 model(s) needed are here but not of the kind their step needs")

    # the encoder of the index a dense step will search (built for the flow): index_settings.encoder
    dense = FlowSpec.parse({"name": "dense_ce", "index_settings": {"encoder": "tessera-cross-encoder"},
                            "steps": {"dense": {"op": "retrieve.dense"}}})
    with pytest.raises(MissingModelsError, match="step dense .index_settings.encoder.*is a cross-encoder"):
        check_models([dense])
    check_models([FlowSpec.parse({"name": "fine", "steps": {"embed": {"op": "embed.sentence_transformer"}}})])


def test_a_plain_sequence_classifier_folder_is_no_embedding_model(tmp_path, untrained_ce, static_folder):
    """A Hugging Face cross-encoder checkpoint without sentence-transformers' files: its architecture says it."""
    from operators.models.sentence_transformers import NotAnEmbeddingModelError, check_sentence_embedder

    folder = tmp_path / "hf-ce"
    shutil.copytree(untrained_ce, folder)
    for name in ("modules.json", "config_sentence_transformers.json", "sentence_bert_config.json"):
        (folder / name).unlink()
    with pytest.raises(NotAnEmbeddingModelError, match="architectures are BertForSequenceClassification"):
        check_sentence_embedder(folder)
    # PyLate's layout: a sentence-transformers folder whose settings are ColBERT's
    pylate = tmp_path / "pylate"
    shutil.copytree(untrained_ce, pylate)
    (pylate / "config_sentence_transformers.json").write_text(json.dumps({"query_length": 32}), encoding="utf-8")
    with pytest.raises(NotAnEmbeddingModelError, match="PyLate's ColBERT settings"):
        check_sentence_embedder(pylate)
    from operators.models import resolve_model_path

    check_sentence_embedder(resolve_model_path("all-MiniLM-L6-v2"))  # real embedding models pass
    check_sentence_embedder(static_folder)
