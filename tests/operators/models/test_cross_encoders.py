"""``load_cross_encoder`` loads real cross-encoder checkpoints and refuses folders without a scoring head.

Without the check, sentence-transformers loads a bi-encoder folder or plain BERT weights as a
CrossEncoder with a randomly initialised classifier, and ``rerank.cross_encoder`` reorders
candidates by noise without a word. Every folder here is real: the packaged MiniLM (a
sentence-transformers bi-encoder), its transformer saved as plain Hugging Face files, the same
with a sequence-classification head, and a saved CrossEncoder (``untrained_ce``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from operators.models import load_cross_encoder, resolve_model_path
from operators.models.cross_encoders import NotACrossEncoderError
from operators.models.references import ModelNotFoundError


@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory) -> dict[str, Path]:
    """MiniLM's transformer as plain Hugging Face folders: without a head (BertModel) and with one
    (BertForSequenceClassification, one label, as a user's own fine-tuned reranker is saved)."""
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    minilm = resolve_model_path("minilm")
    root = tmp_path_factory.mktemp("hf")
    tokenizer = AutoTokenizer.from_pretrained(str(minilm), local_files_only=True)
    folders = {"plain": root / "plain", "classifier": root / "classifier"}
    AutoModel.from_pretrained(str(minilm), local_files_only=True).save_pretrained(folders["plain"])
    AutoModelForSequenceClassification.from_pretrained(str(minilm), num_labels=1, local_files_only=True) \
        .save_pretrained(folders["classifier"])
    for folder in folders.values():
        tokenizer.save_pretrained(folder)
    return folders


def test_a_bi_encoder_or_plain_encoder_folder_is_refused_naming_its_architecture(tmp_path):
    minilm = resolve_model_path("minilm")  # a sentence-transformers bi-encoder folder
    plain = tmp_path / "plain"  # its transformer alone, as BertModel.save_pretrained writes it: files copied, since
    plain.mkdir()  # building it with transformers imports torch (5 CPU-seconds of a make test-fast worker)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copy(minilm / name, plain / name)
    for folder in (minilm, plain):
        with pytest.raises(NotACrossEncoderError) as err:
            load_cross_encoder(str(folder))
        message = err.value.message
        assert message.startswith(f"not a cross-encoder: {folder} has no sequence-classification head")
        assert "architectures are BertModel" in message and "tessera train --model cross-encoder" in message
        assert isinstance(err.value, ModelNotFoundError) and "\n" not in message


def test_the_reranker_step_fails_on_a_bi_encoder_instead_of_scoring_with_a_random_head():
    from operators.registry import create

    op = create("rerank.cross_encoder", {"model": str(resolve_model_path("minilm")), "n": 2})
    rows = pa.table({"qid": ["1", "1"], "query": ["bees"] * 2, "docno": ["a", "b"],
                     "text": ["Bees make honey.", "Stocks fell."], "rank": pa.array([1, 2], pa.int32())})
    with pytest.raises(NotACrossEncoderError, match="not a cross-encoder"):
        op(rows)


@pytest.mark.integration
def test_real_cross_encoder_checkpoints_still_load(hf_folders, untrained_ce, tmp_path):
    plain_hf = load_cross_encoder(str(hf_folders["classifier"]))  # a plain HF sequence-classification checkpoint
    trained_layout = load_cross_encoder(str(untrained_ce))  # what tessera train saves
    for model in (plain_hf, trained_layout):
        scores = model.predict([("bees", "Bees make honey."), ("bees", "Stocks fell.")])
        assert len(scores) == 2

    # a config that names no architecture: the weights decide (a classifier tensor is a head)
    for name, source in (("headless", hf_folders["plain"]), ("headed", hf_folders["classifier"])):
        folder = shutil.copytree(source, tmp_path / name)
        config = json.loads((folder / "config.json").read_text())
        config.pop("architectures")
        (folder / "config.json").write_text(json.dumps(config))
    assert load_cross_encoder(str(tmp_path / "headed")) is not None
    with pytest.raises(NotACrossEncoderError, match="its weights hold no classifier"):
        load_cross_encoder(str(tmp_path / "headless"))
