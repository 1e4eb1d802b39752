"""The static embedder end to end: ``tessera train --model static`` distils it (model2vec, offline), ingestion
embeds a corpus with it, and ``retrieve.dense`` embeds queries with it through the index's encoder.

The base model is a tiny random BERT over a 36-word vocabulary, built in the test: distilling it takes a second,
where distilling MiniLM's 30K tokens takes minutes (a measurement step, docs/results.md). What the test checks
does not depend on the vectors being good, only on the same model embedding both sides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

WORDS = ("honey bees make wax cells the hive queen lays eggs workers gather nectar from flowers cats sleep on "
         "warm sofas dogs bark at night stars shine over mountains rivers flow into seas").split()
REPO = Path(__file__).resolve().parents[2]
DOCS = {"bees": "honey bees make wax cells", "cats": "cats sleep on warm sofas", "dogs": "dogs bark at night",
        "stars": "stars shine over mountains", "rivers": "rivers flow into seas"}


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> Path:
    """A Hugging Face BERT folder (1 layer, 32-d, seeded) with a WordPiece tokenizer over ``WORDS``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS))]
    tokenizer = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                             special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(str(folder))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(str(folder))
    return folder


@pytest.fixture
def recipe(tiny_base, tmp_path) -> Path:
    path = tmp_path / "static_recipe.yaml"
    path.write_text(f"name: tiny-static\nsteps:\n  bm25: {{op: retrieve.bm25}}\n"
                    f"training:\n  static: {{base: '{tiny_base}', pca_dims: 16}}\n", encoding="utf-8")
    return path


@pytest.mark.integration
def test_train_static_distils_without_a_dataset_reuses_and_embeds_both_sides(run_cli, recipe, tmp_path):
    from flows.ingestion import ingest

    status, out = run_cli("train", "--model", "static", "--spec", str(recipe), "--quiet")
    assert status == 0, out
    model = tmp_path / "models" / "tessera-static"
    record = json.loads((model / "training.json").read_text(encoding="utf-8"))
    assert record["kind"] == "static" and record["training"]["dimension"] == 16
    assert json.loads((model / "config.json").read_text(encoding="utf-8"))["tokenizer_name"] != str(recipe)
    status, out = run_cli("train", "--model", "static", "--spec", str(recipe), "--quiet")
    assert status == 0 and "reused" in out

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in DOCS.items()),
                      encoding="utf-8")
    report = ingest(corpus, tmp_path / "idx", spec="ingest_static", settings={"dim": 16}, executor="local",
                    chunk=False, progress=False)
    assert (report.docs, report.failures) == (5, 0)
    status, out = run_cli("run", "dense_static", "--index", str(tmp_path / "idx"), "-q", "honey bees wax",
                          "--json", "--no-cache", "--quiet")
    assert status == 0, out
    rows = json.loads(out)["rows"]
    assert rows[0]["docno"] == "bees" and len(rows) == 5


def test_kinds_that_need_a_dataset_still_ask_for_one_and_a_missing_static_model_names_its_command(tmp_path):
    from flows.train import TrainError
    from flows.train.recipe import TrainOptions, train, train_command

    recipe = tmp_path / "static_recipe.yaml"  # a base that is never read: the refusal comes before any model
    recipe.write_text("name: tiny-static\nsteps:\n  bm25: {op: retrieve.bm25}\n"
                      f"training:\n  static: {{base: '{tmp_path / 'no-base'}', pca_dims: 16}}\n", encoding="utf-8")
    options = TrainOptions(dataset=None, models=["static", "bi-encoder"], spec=recipe, output=tmp_path)
    with pytest.raises(TrainError, match="training bi-encoder needs --dataset") as caught:
        train(options, log=lambda message: None)
    assert caught.value.field == "dataset" and not (tmp_path / "tessera-static").exists()  # refused before distilling
    assert train_command("tessera-static") == "tessera train --model static"
    assert train_command("tessera-bi-encoder").startswith("tessera train --dataset ")


@pytest.mark.integration  # ingests with a torch model, twice (once in a child process)
def test_an_index_takes_the_encoders_dimension_unless_one_is_set_and_a_wrong_one_is_refused(static_folder, tmp_path):
    """A spec without ``dim`` used to fail at the first shard's write (384, MiniLM's, against 16)."""
    from flows.ingestion import ingest
    from flows.ingestion.errors import IngestError
    from operators.store import Index

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in DOCS.items()), encoding="utf-8")
    embed = {"op": "embed.sentence_transformer", "params": {"model": str(static_folder)}}
    spec = {"name": "s", "steps": {"embed": embed},
            "index_settings": {"encoder": str(static_folder)}}
    report = ingest(corpus, tmp_path / "idx", spec=spec, executor="local", shard_size=2, progress=False)
    assert (report.docs, report.shards_written, Index.open(tmp_path / "idx").settings.dim) == (5, 3, 16)
    # Run again, every shard is done: the index's shards give the dim, and the encoder is not loaded to ask it
    # (MiniLM's load took 10 s of the 12 s of a second `make demo` ingest).
    again = subprocess.run([sys.executable, "-c", "import json, sys\nfrom flows.ingestion import ingest\n"
                            "r = ingest(sys.argv[1], sys.argv[2], spec=json.loads(sys.argv[3]), executor='local', "
                            "shard_size=2, progress=False)\n"
                            "print(r.shards_skipped, 'sentence_transformers' in sys.modules, 'torch' in sys.modules)",
                            str(corpus), str(tmp_path / "idx"), json.dumps(spec)],
                           capture_output=True, text=True, timeout=120, cwd=REPO)
    assert again.returncode == 0 and again.stdout.split() == ["3", "False", "False"], again.stderr[-2000:]
    with pytest.raises(IngestError, match="dim is 384 but the encoder .* gives 16-d") as err:
        ingest(corpus, tmp_path / "idx2", spec=spec, settings={"dim": 384}, executor="local", progress=False)
    assert err.value.field == "settings.dim" and not (tmp_path / "idx2").exists()
    with pytest.raises(IngestError, match="needs dense or bm25") as err:  # a check of the settings as a whole
        ingest(corpus, tmp_path / "idx3", settings={"dense": False, "bm25": False}, executor="local", progress=False)
    assert err.value.field == "settings" and not (tmp_path / "idx3").exists()
