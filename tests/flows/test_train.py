"""``tessera train``: hard-negative mining on the train split, then a tiny real training run.

The dataset is a slice of SciFact written into a temporary BEIR folder: the first
16 train queries' relevant documents plus the first 150 documents of the corpus,
the real train qrels of those queries, and a few test qrels (which must never be
read). Mining uses BM25 only on that small corpus; training runs 2 steps with short
sequences, through ``python -m flows.train`` in a subprocess.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.flows.scifact_slice import NEEDS_SCIFACT, REPO, write_slice

MUSIQUE = REPO.parent / "shared" / "data" / "musique_train100_hipporag"

pytestmark = NEEDS_SCIFACT

RECIPE = """\
name: tiny-train
steps:
  bm25: {op: retrieve.bm25, params: {k: 12}}
training:
  split: train
  mining: {skip_top: 1, negatives: 3, seed: 7}
  cross_encoder: {epochs: 1, batch_size: 2, max_length: 32, negatives: 2, in_batch_negatives: 1, train_layers: 1}
  bi_encoder: {epochs: 1, batch_size: 2, max_length: 32, negatives: 1}
"""


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory) -> Path:
    """A small BEIR folder cut from SciFact (train and test qrels, 150 + relevant documents)."""
    return write_slice(tmp_path_factory.mktemp("scifact_slice"), RECIPE, train_queries=16, other_docs=150,
                       test_judgements=5)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    saved = os.environ.get("TESSERA_HOME")
    os.environ["TESSERA_HOME"] = str(home)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    yield home
    if saved is None:
        os.environ.pop("TESSERA_HOME", None)
    else:
        os.environ["TESSERA_HOME"] = saved


def _train_cli(*args: str, home: Path, check: int | None = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "TESSERA_HOME": str(home), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env.pop("TESSERA_DEBUG", None)
    proc = subprocess.run([sys.executable, "-m", "flows.train", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_mining_reads_only_train_never_returns_a_positive_and_is_deterministic(slice_dir, home):
    from flows.train.mining import MiningParams, mine
    from flows.train.recipe import load_recipe

    flow, training = load_recipe(slice_dir / "recipe.yaml")
    params = MiningParams(skip_top=1, negatives=3, seed=7)
    first = mine(slice_dir, flow, params=params, progress=False, log=lambda _: None)
    again = mine(slice_dir, flow, params=params, progress=False, log=lambda _: None)
    assert first.examples == again.examples
    other = mine(slice_dir, flow, params=params.model_copy(update={"seed": 8}), progress=False, log=lambda _: None)
    assert [e["negative_ids"] for e in other.examples] != [e["negative_ids"] for e in first.examples]

    train = _qrels_of(slice_dir, "train")
    test_only = set(_qrels_of(slice_dir, "test")) - set(train)
    assert first.stats["split"] == "train" and len(first.examples) == sum(len(v) for v in train.values())
    for e in first.examples:
        assert e["qid"] in train and e["qid"] not in test_only
        assert e["positive_id"] in train[e["qid"]]
        assert not set(e["negative_ids"]) & train[e["qid"]], "a relevant document was mined as a negative"
        assert 1 <= len(e["negatives"]) <= 3 and len(set(e["negative_ids"])) == len(e["negative_ids"])
        assert e["positive"] and all(e["negatives"])
    # the texts are what the rerankers read: title, newline, text
    doc = next(json.loads(line) for line in open(slice_dir / "corpus.jsonl", encoding="utf-8")
               if json.loads(line)["_id"] == first.examples[0]["positive_id"])
    assert first.examples[0]["positive"] == f"{doc['title']}\n{doc['text']}"


def _qrels_of(root: Path, split: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for line in (root / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, docno, score = line.split("\t")
        if int(score) > 0:
            found.setdefault(qid, set()).add(docno)
    return found


def test_evaluation_splits_missing_splits_and_unknown_kinds_are_clear_errors(slice_dir, home):
    from flows.train.errors import TrainError
    from flows.train.splits import load_training_split
    from flows.train.recipe import resolve_kinds

    with pytest.raises(TrainError, match="--allow-eval-split"):
        load_training_split(slice_dir, "test")
    assert load_training_split(slice_dir, "test", allow_eval_split=True).split == "test"
    with pytest.raises(TrainError, match=str(slice_dir / "qrels" / "dev.tsv")):
        load_training_split(slice_dir, "dev", allow_eval_split=True)
    with pytest.raises(TrainError, match="cross-encoder, bi-encoder, colbert, static or all"):
        resolve_kinds(["reranker"])
    assert resolve_kinds(["all"]) == ["cross-encoder", "bi-encoder", "colbert"]
    proc = _train_cli("--dataset", str(slice_dir), "--split", "test", "--quiet", home=home, check=2)
    assert proc.stderr.count("\n") == 1 and "evaluation split" in proc.stderr


@pytest.mark.slow
def test_train_cli_saves_checkpoints_the_operators_load_and_reuses_them(slice_dir, home):
    from flows.train.recipe import TrainOptions, train

    proc = _train_cli("--dataset", str(slice_dir), "--spec", str(slice_dir / "recipe.yaml"), "--model",
                      "cross-encoder", "--max-steps", "2", home=home)
    assert "tessera-cross-encoder" in proc.stdout and "made in" in proc.stdout  # the summary table
    assert "cross-encoder: trained in" in proc.stderr  # the progress log
    options = TrainOptions(dataset=slice_dir, models=["bi-encoder"], spec=slice_dir / "recipe.yaml", max_steps=2,
                           progress=False)
    assert not train(options, log=lambda _: None).models[0].reused
    models = home / "models"
    for name, kind in (("tessera-cross-encoder", "cross-encoder"), ("tessera-bi-encoder", "bi-encoder")):
        record = json.loads((models / name / "training.json").read_text(encoding="utf-8"))
        assert record["kind"] == kind and record["split"] == "train" and record["training"]["steps"] == 2
        assert record["dataset"] == str(slice_dir) and record["counts"]["examples"] > 0
        assert record["hyperparameters"]["max_length"] == 32 and record["versions"]["torch"]
    assert not [p for p in models.iterdir() if p.name.startswith(".")], "a temporary folder was left behind"

    from operators.embed.sentence_transformer import SentenceTransformerEmbedder
    from operators.rerank.cross_encoder import CrossEncoderReranker

    rows = pa.table({"qid": ["1"] * 3, "query": ["vitamin D and bone density"] * 3, "docno": ["a", "b", "c"],
                     "text": ["Vitamin D supplements and bone mineral density in adults.",
                              "Honey bees pollinate crops.", "Bone density declines with age."],
                     "rank": pa.array([1, 2, 3], pa.int32())})
    reranked = CrossEncoderReranker({"model": "tessera-cross-encoder", "n": 3, "on_error": "error"}, step_id="ce")(rows)
    assert sorted(reranked.column("docno").to_pylist()) == ["a", "b", "c"]
    scores = reranked.column("score_ce").to_pylist()
    assert all(isinstance(s, float) and math.isfinite(s) for s in scores) and scores == sorted(scores, reverse=True)
    embedded = SentenceTransformerEmbedder({"model": "tessera-bi-encoder", "input_column": "text"})(rows)
    assert len(embedded.column("vector")[0]) == 384

    ce = TrainOptions(**{**options.__dict__, "models": ["cross-encoder"]})
    again = train(ce, log=lambda _: None)  # the checkpoint the CLI wrote, same config: reused
    assert again.models[0].reused and again.models[0].path == models / "tessera-cross-encoder"
    lines = []
    changed = train(TrainOptions(**{**ce.__dict__, "max_steps": 1}), log=lines.append)  # another config
    assert not changed.models[0].reused and changed.models[0].record["training"]["steps"] == 1
    kept = models / f"tessera-cross-encoder-previous-{again.models[0].record['config_key'][:12]}"
    assert f"(replacing the checkpoint there: max_steps changed; the old one is kept as {kept.name})" in \
        "\n".join(lines)
    record = json.loads((models / "tessera-cross-encoder" / "training.json").read_text(encoding="utf-8"))
    assert record["training"]["steps"] == 1  # the old checkpoint was replaced in place, and kept aside
    assert json.loads((kept / "training.json").read_text(encoding="utf-8"))["training"]["steps"] == 2
    assert record["key_inputs"]["max_steps"] == 1 and record["key_inputs"]["params"]["max_length"] == 32


def test_pseudo_queries_are_corpus_sentences_whose_document_is_the_positive(slice_dir, home):
    from flows.train.mining import MiningParams, mine
    from flows.train.recipe import load_recipe
    from flows.train.synthetic import SyntheticParams, sentences

    assert sentences("Rates fell 5.2 percent. Then 3 rose! Why? e.g. this stays whole.") == [
        "Rates fell 5.2 percent.", "Then 3 rose!", "Why? e.g. this stays whole."]
    flow, _ = load_recipe(slice_dir / "recipe.yaml")
    params = MiningParams(skip_top=0, negatives=3, seed=7)
    plain = mine(slice_dir, flow, params=params, progress=False, log=lambda _: None)
    synthetic = SyntheticParams(queries=12, keep_sentence=0.0, seed=3)
    mined = mine(slice_dir, flow, params=params, synthetic=synthetic, progress=False, log=lambda _: None)
    assert mined.examples[:len(plain.examples)] == plain.examples, "pseudo-queries changed the judged examples"
    pseudo = mined.examples[len(plain.examples):]
    assert len(pseudo) == mined.stats["pseudo_queries"] == 12 and all(e["synthetic"] for e in pseudo)
    assert mined.examples == mine(slice_dir, flow, params=params, synthetic=synthetic, progress=False,
                                  log=lambda _: None).examples
    corpus = {d["_id"]: d for d in map(json.loads, open(slice_dir / "corpus.jsonl", encoding="utf-8"))}
    for e in pseudo:
        doc = corpus[e["positive_id"]]
        assert e["qid"] == f"pseudo-{doc['_id']}" and e["query"] in doc["text"]
        assert e["query"] not in e["positive"], "the sentence was left in its positive with keep_sentence 0"
        assert e["positive"].startswith(doc["title"] + "\n") and len(e["positive"]) > len(doc["title"]) + 20
        assert e["positive_id"] not in e["negative_ids"] and 1 <= len(e["negatives"]) <= 3


def test_max_examples_mines_only_the_pseudo_queries_that_fill_it(slice_dir, home):
    """``--max-examples 40`` mined all 1,200 of a recipe's pseudo-queries (minutes of searching) when the judged
    examples already filled it; now the pseudo-queries are searched until they fill what is left, giving the
    examples the whole mining began with."""
    from flows.train.mining import MiningParams, mine
    from flows.train.recipe import load_recipe
    from flows.train.synthetic import SyntheticParams

    flow, _ = load_recipe(slice_dir / "recipe.yaml")
    quiet = {"params": MiningParams(skip_top=0, negatives=3, seed=7), "progress": False, "log": lambda _: None}
    judged = len(mine(slice_dir, flow, **quiet).examples)
    synthetic = SyntheticParams(queries=12, keep_sentence=0.0, seed=3)
    whole = mine(slice_dir, flow, synthetic=synthetic, **quiet)
    for room in (1, 5):
        capped = mine(slice_dir, flow, synthetic=synthetic, max_examples=judged + room, **quiet)
        assert capped.examples == whole.examples[:judged + room] and capped.stats["pseudo_queries"] == room
    said: list[str] = []
    filled = mine(slice_dir, flow, synthetic=synthetic, max_examples=judged, **{**quiet, "log": said.append})
    assert filled.examples == whole.examples[:judged] and filled.stats["pseudo_queries"] == 0
    assert any("no pseudo-query is mined" in line for line in said), said


def test_pseudo_queries_from_another_corpus_are_mined_on_that_corpus(slice_dir, home, tmp_path):
    from flows.train.errors import TrainError
    from flows.train.mining import MiningParams, mine
    from flows.train.recipe import load_recipe
    from flows.train.synthetic import SyntheticParams

    wikipedia = REPO.parent / "shared" / "data" / "wikipedia_vital10k_ovos" / "corpus.jsonl"
    if not wikipedia.is_file():
        pytest.skip(f"the Wikipedia corpus is not at {wikipedia} (the shared evaluation data)")
    other = tmp_path / "wiki"
    other.mkdir()
    with open(wikipedia, encoding="utf-8") as f:
        (other / "corpus.jsonl").write_text("".join(next(f) for _ in range(120)), encoding="utf-8")
    wiki_docs = {d["_id"]: d for d in map(json.loads, open(other / "corpus.jsonl", encoding="utf-8"))}
    flow, _ = load_recipe(slice_dir / "recipe.yaml")
    params = MiningParams(skip_top=0, negatives=3, seed=7)
    plain = mine(slice_dir, flow, params=params, progress=False, log=lambda _: None)
    synthetic = SyntheticParams(queries=4, keep_sentence=0.0, seed=3, corpora=[{"corpus": str(other), "queries": 6}])
    mined = mine(slice_dir, flow, params=params, synthetic=synthetic, progress=False, log=lambda _: None)
    assert mined.examples[:len(plain.examples)] == plain.examples
    pseudo = mined.examples[len(plain.examples):]
    assert mined.stats["pseudo_queries_by_corpus"] == {str(slice_dir / "corpus.jsonl"): 4,
                                                       str(other / "corpus.jsonl"): 6}
    drawn = pseudo[4:]
    assert len(drawn) == 6 and all(e["synthetic"] for e in drawn)
    for e in drawn:  # query, positive and negatives all come from the other corpus, retrieved from its own index
        assert e["query"] in wiki_docs[e["positive_id"]]["text"] and e["query"] not in e["positive"]
        assert set(e["negative_ids"]) <= set(wiki_docs) and e["positive_id"] not in e["negative_ids"]
    only_other = synthetic.model_copy(update={"queries": 0})  # the other corpus alone: the same draws
    assert mine(slice_dir, flow, params=params, synthetic=only_other, progress=False,
                log=lambda _: None).examples[len(plain.examples):] == drawn

    missing = SyntheticParams(corpora=[{"corpus": str(tmp_path / "nowhere"), "queries": 6}])
    with pytest.raises(TrainError, match="no corpus at .*nowhere") as err:
        mine(slice_dir, flow, params=params, synthetic=missing, progress=False, log=lambda _: None)
    assert err.value.field == "training.synthetic.corpora.0.corpus"
    _, shipped = load_recipe("train_wikipedia")  # the built-in recipe of tessera-wikipedia-cross-encoder
    assert [(REPO / c.corpus / "corpus.jsonl").resolve() for c in shipped.synthetic.corpora] == [wikipedia.resolve()]
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE + f"  synthetic: {{corpora: [{{corpus: {other}}}]}}\n", encoding="utf-8")
    with pytest.raises(TrainError, match="Field required") as err:
        load_recipe(recipe)
    assert err.value.field == "training.synthetic.corpora.0.queries"


def test_train_long_is_the_recipe_with_wikipedia_and_a_longer_cross_encoder_schedule():
    from flows.train.recipe import load_recipe

    flow, long = load_recipe("train_long")  # the built-in recipe of tessera-long-cross-encoder (README)
    base_flow, base = load_recipe("train")
    assert {s: v.model_dump() for s, v in flow.steps.items()} == {s: v.model_dump() for s, v in base_flow.steps.items()}
    assert long.mining == base.mining and long.split == base.split
    assert long.synthetic.model_copy(update={"corpora": []}) == base.synthetic
    assert [(c.corpus, c.queries, c.seed) for c in long.synthetic.corpora] == [
        ("../shared/data/wikipedia_vital10k_ovos", 3000, 1)]
    schedule = {"epochs", "then"}
    assert long.cross_encoder.model_dump(exclude=schedule) == base.cross_encoder.model_dump(exclude=schedule)
    assert (long.cross_encoder.epochs, long.cross_encoder.then.epochs) == (6, 2)
    then = {"epochs"}
    assert long.cross_encoder.then.model_dump(exclude=then) == base.cross_encoder.then.model_dump(exclude=then)


@pytest.mark.slow
def test_more_labelled_datasets_are_mined_on_their_own_index_after_the_first(slice_dir, home, tmp_path):
    from flows.train.errors import TrainError
    from flows.train.mining import MiningParams, mine
    from flows.train.splits import LabelledSet
    from flows.train.recipe import TrainOptions, load_recipe, train

    if not (MUSIQUE / "qrels" / "test.tsv").is_file():
        pytest.skip(f"MuSiQue train100 is not at {MUSIQUE} (the shared evaluation data)")
    flow, _ = load_recipe(slice_dir / "recipe.yaml")
    params = MiningParams(skip_top=0, negatives=3, seed=7)
    quiet = {"params": params, "progress": False, "log": lambda _: None}
    plain = mine(slice_dir, flow, **quiet)
    musique = LabelledSet(dataset=str(MUSIQUE), split="test", allow_eval_split=True)  # its qrels file is test.tsv
    mined = mine(slice_dir, flow, more=[(musique, "")], **quiet)
    assert mined.examples[:len(plain.examples)] == plain.examples
    added = mined.examples[len(plain.examples):]
    alone = mine(MUSIQUE, flow, split="test", allow_eval_split=True, **quiet)  # as if it were the only set
    assert added == alone.examples and len(added) > 100
    judged = _qrels_of(MUSIQUE, "test")
    with open(MUSIQUE / "corpus.jsonl", encoding="utf-8") as f:
        corpus = {json.loads(line)["_id"] for line in f}
    for e in added:  # positives are its judgements; negatives come from its own corpus, never a relevant one
        assert e["positive_id"] in judged[e["qid"]] and set(e["negative_ids"]) <= corpus
        assert not set(e["negative_ids"]) & judged[e["qid"]]
    sets = mined.stats["datasets"]
    assert [(s["dataset"], s["split"], s["examples"]) for s in sets] == [
        (str(slice_dir), "train", len(plain.examples)), (str(MUSIQUE), "test", len(added))]
    assert mined.stats["queries"] == sets[0]["queries"] + 100 and mined.stats["examples"] == len(mined.examples)
    assert sets[0]["index"] != sets[1]["index"] and "datasets" not in plain.stats

    lines: list[str] = []
    with pytest.raises(TrainError, match="evaluation split") as err:  # test.tsv needs allow_eval_split here too
        mine(slice_dir, flow, more=[(LabelledSet(dataset=str(MUSIQUE), split="test"), "")], params=params,
             progress=False, log=lines.append)
    assert err.value.field == "split" and not any(line.startswith("mining") for line in lines)
    with pytest.raises(TrainError, match="is given twice") as err:
        mine(slice_dir, flow, more=[(LabelledSet(dataset=f"{slice_dir}/../{slice_dir.name}"), "")], **quiet)
    assert err.value.field == "dataset"
    recipe = tmp_path / "recipe.yaml"
    options = TrainOptions(dataset=slice_dir, models=["bi-encoder"], spec=recipe, max_steps=1,
                           output=tmp_path / "models", progress=False)
    for entry, field in ((f"{{dataset: {MUSIQUE}, split: test}}", "training.datasets.0.split"),
                         (f"{{dataset: {tmp_path / 'nowhere'}}}", "training.datasets.0.dataset"),
                         (f"{{dataset: {MUSIQUE}, splits: test}}", "training.datasets.0.splits"),
                         (f"{{dataset: {slice_dir}}}", "training.datasets.0.dataset")):
        recipe.write_text(RECIPE + f"  datasets: [{entry}]\n", encoding="utf-8")
        with pytest.raises(TrainError) as err:
            train(options, log=lines.append)
        assert err.value.field == field and not any(line.startswith("mining") for line in lines)

    _, shipped = load_recipe("train_multi")  # the built-in recipe of tessera-multi-bi-encoder
    assert [((REPO / d.dataset).resolve(), d.split, d.allow_eval_split) for d in shipped.datasets] == [
        ((MUSIQUE.parent / "hotpotqa_train100_hipporag").resolve(), "test", True), (MUSIQUE.resolve(), "test", True)]

    copy = tmp_path / "musique_train"  # the same set with its qrels named train.tsv, so one --split serves both
    (copy / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (copy / name).write_bytes((MUSIQUE / name).read_bytes())
    (copy / "qrels" / "train.tsv").write_bytes((MUSIQUE / "qrels" / "test.tsv").read_bytes())
    proc = _train_cli("--dataset", str(slice_dir), "--dataset", str(copy), "--spec", str(slice_dir / "recipe.yaml"),
                      "--model", "bi-encoder", "--max-steps", "1", "--name-prefix", "two-sets", home=home)
    title = f"from {sets[0]['queries'] + 100} judged queries ({slice_dir.name} train + musique_train train)"
    assert title in proc.stdout
    record = json.loads((home / "models" / "two-sets-bi-encoder" / "training.json").read_text(encoding="utf-8"))
    assert record["counts"]["examples"] == len(mined.examples)
    assert [s["dataset"] for s in record["mining"]["datasets"]] == [str(slice_dir), str(copy)]


def test_pseudo_queries_train_only_the_kinds_named(slice_dir, home, tmp_path):
    from flows.train.errors import TrainError
    from flows.train.recipe import TrainOptions, load_recipe, train

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE + "  synthetic: {queries: 6, kinds: [cross-encoder]}\n", encoding="utf-8")
    options = TrainOptions(dataset=slice_dir, models=["cross-encoder", "bi-encoder"], spec=recipe, max_steps=1,
                           output=tmp_path / "models", progress=False)
    report = train(options, log=lambda _: None)
    counts = {m.kind: m.record["counts"]["examples"] for m in report.models}
    assert report.mining["pseudo_queries"] == 6 and counts["cross-encoder"] == counts["bi-encoder"] + 6
    own = {m.kind: m.record["counts"] for m in report.models}  # each model's own numbers, not mining's
    assert (own["cross-encoder"]["pseudo_examples"], own["bi-encoder"]["pseudo_examples"]) == (6, 0)
    assert own["cross-encoder"]["judged_examples"] == own["bi-encoder"]["judged_examples"] == counts["bi-encoder"]
    assert (own["cross-encoder"]["negatives_per_example"], own["bi-encoder"]["negatives_per_example"]) == (2, 1)
    assert own["cross-encoder"]["mined_negatives_per_example"] == report.mining["params"]["negatives"] == 3
    recipe.write_text(RECIPE + "  synthetic: {queries: 6, kinds: [reranker]}\n", encoding="utf-8")
    with pytest.raises(TrainError, match=r"be 'cross-encoder', 'bi-encoder' or 'colbert' \(got 'reranker'\)") as err:
        load_recipe(recipe)
    assert err.value.field == "training.synthetic.kinds.0"
    recipe.write_text(RECIPE + "  synthetic: {queries: 6, min_words: 9, max_words: 8}\n", encoding="utf-8")
    with pytest.raises(TrainError, match=r"min_words \(9\) is larger than max_words \(8\)") as err:
        load_recipe(recipe)
    assert err.value.field == "training.synthetic"


def test_max_examples_mines_the_first_judged_queries_and_caps_the_examples_judged_first(slice_dir, home, tmp_path):
    from flows.train.recipe import TrainOptions, train

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE + "  synthetic: {queries: 6, kinds: [cross-encoder]}\n", encoding="utf-8")
    options = TrainOptions(dataset=slice_dir, models=["cross-encoder"], spec=recipe, max_steps=1, max_examples=3,
                           output=tmp_path / "models", progress=False)
    report = train(options, log=lambda _: None)
    record = report.models[0].record
    assert report.mining["queries"] == 3 and report.mining["pseudo_queries"] == 0  # 6 were mined for nothing
    assert record["counts"]["examples"] == 3  # the 3 queries give at least 3 judged examples: no pseudo-query is left
    recipe.write_text(RECIPE, encoding="utf-8")  # no pseudo-queries: the same 3 judged examples, the same weights
    again = train(options, log=lambda _: None)
    assert again.mining["pseudo_queries"] == 0 and again.models[0].reused


def test_a_base_naming_another_kind_starts_from_this_runs_checkpoint_trained_first(slice_dir, home, tmp_path):
    from flows.train.errors import TrainError
    from flows.train.recipe import TrainOptions, train

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.replace("cross_encoder: {", "cross_encoder: {base: bi-encoder, "), encoding="utf-8")
    options = TrainOptions(dataset=slice_dir, models=["cross-encoder", "bi-encoder"], spec=recipe, max_steps=1,
                           output=tmp_path / "models", name_prefix="own", progress=False)
    report = train(options, log=lambda _: None)
    assert [m.kind for m in report.models] == ["bi-encoder", "cross-encoder"]
    bi_encoder = tmp_path / "models" / "own-bi-encoder"
    assert report.models[1].record["hyperparameters"]["base"] == str(bi_encoder)
    alone = TrainOptions(dataset=slice_dir, models=["cross-encoder"], spec=recipe, max_steps=1,
                         output=tmp_path / "other", progress=False)
    said: list[str] = []
    with pytest.raises(TrainError, match="this run's bi-encoder .* is not trained yet: add --model bi-encoder") as err:
        train(alone, log=said.append)
    assert err.value.field == "training.cross_encoder.base"
    assert said == [], said  # refused before mining: it mined first (an index build on a new dataset)
    recipe.write_text(RECIPE.replace("cross_encoder: {", "cross_encoder: {base: bi-encoder, ")
                      .replace("bi_encoder: {", "bi_encoder: {base: cross-encoder, "), encoding="utf-8")
    with pytest.raises(TrainError, match="bases form a cycle") as err:
        train(options, log=lambda _: None)
    assert err.value.field == "training"


def test_a_follow_up_schedule_trains_on_after_the_main_one_and_keeps_older_keys(slice_dir, home, tmp_path):
    from flows.train.cross_encoder import CrossEncoderParams
    from flows.train.recipe import TrainOptions, train

    assert "then" not in CrossEncoderParams().model_dump(mode="json"), "an unset follow-up changed every training key"
    recipe = tmp_path / "recipe.yaml"
    options = TrainOptions(dataset=slice_dir, models=["cross-encoder"], spec=recipe, max_steps=2,
                           output=tmp_path / "models", progress=False)
    recipe.write_text(RECIPE, encoding="utf-8")
    plain = train(options, log=lambda _: None).models[0].record
    recipe.write_text(RECIPE.replace("cross_encoder: {", "cross_encoder: {then: {epochs: 1, lr: 1.0e-5}, "),
                      encoding="utf-8")
    lines: list[str] = []
    followed = train(options, log=lines.append).models[0].record
    assert followed["training"]["steps"] == 4, "the follow-up's own max_steps were not run after the main schedule's"
    assert followed["hyperparameters"]["then"] == {"epochs": 1, "lr": 1.0e-5, "head_lr": 2.0e-4}
    assert followed["config_key"] != plain["config_key"] and "params.then changed" in "\n".join(lines)
    alone = train(TrainOptions(**{**options.__dict__, "epochs": 1}), log=lambda _: None).models[0].record
    assert alone["training"]["steps"] == 2 and "then" not in alone["hyperparameters"], "--epochs kept the follow-up"


def test_a_trained_cross_encoder_as_base_keeps_its_head_which_train_adapt_continues(slice_dir, home, tmp_path,
                                                                                   untrained_ce):
    import torch
    from sentence_transformers import CrossEncoder

    from flows.train.errors import TrainError
    from flows.train.recipe import TrainOptions, load_recipe, train

    base = CrossEncoder(str(untrained_ce), local_files_only=True, device="cpu")
    base.model.classifier.bias.data += 4.0  # a head no fresh initialisation gives
    base.save(str(tmp_path / "trained"))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.replace("cross_encoder: {", f"cross_encoder: {{base: {tmp_path / 'trained'}, "
                                     "lr: 1.0e-12, head_lr: 1.0e-12, "), encoding="utf-8")
    options = TrainOptions(dataset=slice_dir, models=["cross-encoder"], spec=recipe, max_steps=1,
                           output=tmp_path / "models", progress=False)
    train(options, log=lambda _: None)
    continued = CrossEncoder(str(tmp_path / "models" / "tessera-cross-encoder"), local_files_only=True, device="cpu")
    pairs = [("vitamin D deficiency", "Low vitamin D levels are common in winter."),
             ("vitamin D deficiency", "The cathedral was finished in 1250.")]
    logits = {"activation_fn": torch.nn.Identity()}
    before, after = base.predict(pairs, **logits), continued.predict(pairs, **logits)
    assert min(before) > 2.0 and abs(after - before).max() < 1e-3, (before, after)

    lines: list[str] = []  # without tessera-long-cross-encoder in this home, train_adapt fails before mining
    with pytest.raises(TrainError, match="cross-encoder's base: 'tessera-long-cross-encoder' is not trained yet: "
                                         "make it with: tessera train .*--spec train_long") as err:
        train(TrainOptions(dataset=slice_dir, models=["cross-encoder"], spec="train_adapt", progress=False),
              log=lines.append)
    assert err.value.field == "training.cross_encoder.base" and not lines
    flow, adapt = load_recipe("train_adapt")  # the built-in recipe that continues tessera-long-cross-encoder
    base_flow, recipe_section = load_recipe("train")
    assert {s: v.model_dump() for s, v in flow.steps.items()} == {
        s: v.model_dump() for s, v in base_flow.steps.items()}
    assert adapt.cross_encoder.base == "tessera-long-cross-encoder" and adapt.cross_encoder.then is None
    assert (adapt.cross_encoder.lr, adapt.cross_encoder.head_lr) == (
        recipe_section.cross_encoder.then.lr, recipe_section.cross_encoder.then.head_lr)
