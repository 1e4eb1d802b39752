"""``tessera train``'s checks on what it is given, each before the work it would waste.

A small slice of SciFact (its first 8 train queries, their relevant documents and 60 more)
is written into temporary BEIR folders, each spoiled one way: train qrels that name
documents the corpus lacks, a corpus that is TSV, empty or repeats an id, qrels that
name an unknown query. Mining runs for real (BM25 only, an index of about 70 documents
in the test's own index folder); no test here trains a model, except where noted (resuming an
interrupted run, ``tessera train --list``, ColBERT's progress bar, one example's warning).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.scifact_slice import NEEDS_SCIFACT, REPO, qrels_rows, write_qrels, write_slice

pytestmark = NEEDS_SCIFACT

RECIPE = """\
name: tiny-train
steps:
  bm25: {op: retrieve.bm25, params: {k: 12}}
training:
  split: train
  mining: {skip_top: 0, negatives: 3, seed: 7}
  synthetic: {queries: 6, kinds: [cross-encoder]}
  cross_encoder: {epochs: 1, batch_size: 2, max_length: 32, negatives: 2, train_layers: 1}
  bi_encoder: {epochs: 1, batch_size: 2, max_length: 32, negatives: 1}
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A BEIR folder: SciFact's first 8 train queries, their train qrels, their documents and 60 others."""
    return write_slice(tmp_path_factory.mktemp("scifact_tiny"), RECIPE, train_queries=8, other_docs=60)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "home"


def _variant(base: Path, where: Path, *, corpus: str | None = None, qrels: list[tuple[str, str, str]] | None = None):
    """A copy of ``base`` with another corpus text or other train qrels."""
    shutil.copytree(base, where)
    if corpus is not None:
        (where / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    if qrels is not None:
        write_qrels(where, "train", qrels)
    return where


def _options(dataset: Path, tmp_path: Path, **changes):
    from flows.train.recipe import TrainOptions

    values = {"dataset": dataset, "models": ["bi-encoder"], "spec": dataset / "recipe.yaml", "max_steps": 1,
              "output": tmp_path / "models", "index_dir": tmp_path / "indices", "progress": False, **changes}
    return TrainOptions(**values)


def _train_cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TESSERA_HOME": str(home), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env.pop("TESSERA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "flows.train", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_kind_with_no_judged_example_is_refused_before_training_and_pseudo_alone_warns(base, home, tmp_path):
    from flows.train.errors import TrainError
    from flows.train.mining import mine
    from flows.train.recipe import load_recipe, train

    absent = [(qid, f"absent-{n}", score) for n, (qid, _, score) in enumerate(qrels_rows(base, "train"))]
    data = _variant(base, tmp_path / "allmissing", qrels=absent)
    lines: list[str] = []
    with pytest.raises(TrainError) as err:  # pseudo-queries are mined, but the bi-encoder reads none of them
        train(_options(data, tmp_path), log=lines.append)
    assert str(err.value).count("\n") == 0 and err.value.field == "dataset"
    assert (f"bi-encoder: no judged example: every train qrel names a document the corpus lacks "
            f"({len(absent)} of {len(absent)})") in err.value.message
    assert not (tmp_path / "models").exists(), "a model was saved from zero examples"
    assert any(line.startswith("warning:") and f"{len(absent)} of {len(absent)} relevant judgements" in line
               and "absent-0" in line for line in lines)
    proc = _train_cli("--dataset", str(data), "--spec", str(data / "recipe.yaml"), "--model", "bi-encoder",
                      "--output", str(tmp_path / "models"), "--index-dir", str(tmp_path / "indices"), "--quiet",
                      home=home)  # --quiet keeps the warning; the error is one line, exit status 2
    assert proc.returncode == 2 and proc.stderr.startswith("tessera: warning: ") and proc.stderr.count("\n") == 2, \
        proc.stderr
    assert "bi-encoder: no judged example" in proc.stderr.splitlines()[1]

    from flows.train.examples import check_judged, own_examples

    flow, training = load_recipe(data / "recipe.yaml")
    mined = mine(data, flow, params=training.mining, synthetic=training.synthetic, index_dir=tmp_path / "indices",
                 progress=False, log=lambda _: None)
    own = {kind: own_examples(kind, mined.examples, training.synthetic.kinds) for kind in ("cross-encoder",)}
    warned: list[str] = []
    check_judged(own, mined.stats, warned.append)  # the cross-encoder has the 6 pseudo-queries: it trains, warned
    assert len(own["cross-encoder"]) == 6 and len(warned) == 1
    assert warned[0].startswith("warning: cross-encoder trains on 6 pseudo-queries alone")


@pytest.mark.slow  # trains the bi-encoder for a step
def test_judgements_that_give_one_example_train_it_with_a_warning_before_training(base, home, tmp_path):
    """One judged query is one example (or a few of one query): no batch holds two, so no step ranks the positive
    against another query's document. It still trains (a smoke test), warned before the first step."""
    from flows.train.examples import MIN_QUERIES, warn_too_few
    from flows.train.recipe import train

    first = qrels_rows(base, "train")[0]
    data = _variant(base, tmp_path / "one", qrels=[first])
    lines: list[str] = []
    report = train(_options(data, tmp_path), log=lines.append)
    assert report.models[0].record["counts"]["examples"] == 1  # the pseudo-queries are the cross-encoder's
    warned = [n for n, line in enumerate(lines) if line.startswith("warning: bi-encoder trains on 1 example from "
                                                                    "1 query: each step sees it alone")]
    training = [n for n, line in enumerate(lines) if line.startswith("bi-encoder: training on 1 examples")]
    assert len(warned) == 1 and warned[0] < training[0], lines
    assert f"judge at least {MIN_QUERIES} queries" in lines[warned[0]]
    said: list[str] = []  # from two queries, a batch holds both: no warning
    warn_too_few({"bi-encoder": [{"query": "first"}, {"query": "second"}]}, said.append)
    assert said == []


def test_a_folder_that_is_no_checkpoint_is_kept_unless_force_and_a_file_output_is_refused(base, home, tmp_path):
    from flows.train import checkpoints
    from flows.train.errors import TrainError
    from flows.train.recipe import train

    mine = tmp_path / "models" / "tessera-bi-encoder"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("the user's own", encoding="utf-8")
    lines: list[str] = []
    with pytest.raises(TrainError, match=f"{mine} exists but is not a checkpoint of tessera train .*--force") as err:
        train(_options(base, tmp_path), log=lines.append)
    assert err.value.field == "output" and lines == [], "it mined before refusing"
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "the user's own"
    checkpoints.check_destination(tmp_path / "models", [mine], force=True)  # --force: replaced, as asked
    (mine / "training.json").write_text("{}", encoding="utf-8")
    checkpoints.check_destination(tmp_path / "models", [mine], force=False)  # a checkpoint: retrained in place

    taken = tmp_path / "taken"
    taken.write_text("a file", encoding="utf-8")
    for output in (taken, taken / "deeper"):
        proc = _train_cli("--dataset", str(base), "--spec", str(base / "recipe.yaml"), "--model", "bi-encoder",
                          "--output", str(output), "--index-dir", str(tmp_path / "indices"), "--quiet", home=home)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"--output {output} is not a folder" in proc.stderr and "internal error" not in proc.stderr
    assert not (tmp_path / "indices").exists(), "it built an index before refusing"


def test_a_corpus_that_is_not_jsonl_or_is_empty_fails_before_an_index_is_built(base, home, tmp_path):
    from flows.train.errors import TrainError
    from flows.train.recipe import train

    docs = [json.loads(line) for line in (base / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    tsv = "".join(f"{d['_id']}\t{d['title']}\t{d['text']}\n" for d in docs)
    cases = {"tsv": (tsv, "line 1 is not JSON"), "empty": ("", "is empty"),
             "untexted": (json.dumps(docs[0]) + "\n" + json.dumps({"_id": "x", "body": "b"}) + "\n",
                          "line 2 has no 'text' field (fields: _id, body)"),
             "list": ("\n[1, 2]\n", "line 2 is a JSON list, not an object"),
             # a 'docid' (MS MARCO's name): its pseudo-queries were all 'pseudo-', refused as one qid given twice
             "unnamed": (json.dumps(docs[0]) + "\n" + json.dumps({"docid": "x", "text": "A text."}) + "\n",
                         "line 2 has no id (fields: docid, text): a document's id is its '_id', else its 'docno', "
                         "'id' or 'doc_id'")}
    for name, (corpus, problem) in cases.items():
        data = _variant(base, tmp_path / name, corpus=corpus)
        with pytest.raises(TrainError) as err:
            train(_options(data, tmp_path), log=lambda _: None)
        assert err.value.message.startswith(f"corpus {data / 'corpus.jsonl'} {problem}"), err.value.message
        assert err.value.field == "dataset" and "\n" not in err.value.message
    assert not (tmp_path / "indices").exists(), "an index was built from a corpus that is not one"


def test_a_repeated_document_id_keeps_its_first_copy_as_ingestion_does_and_is_warned(base, home, tmp_path):
    from flows.train.mining import mine
    from flows.train.recipe import load_recipe

    lines = (base / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    positive = qrels_rows(base, "train")[0][1]
    first = json.loads(next(line for line in lines if json.loads(line)["_id"] == positive))
    later = {**first, "title": "A later copy", "text": "This later copy has another text under the same id. "
             "It also has a second sentence of more than six words."}
    data = _variant(base, tmp_path / "dup", corpus="\n".join(lines + [json.dumps(later)]) + "\n")
    flow, training = load_recipe(data / "recipe.yaml")
    logged: list[str] = []
    mined = mine(data, flow, params=training.mining, index_dir=tmp_path / "indices", progress=False,
                 log=logged.append)
    texts = {e["positive_id"]: e["positive"] for e in mined.examples}
    assert texts[positive] == f"{first['title']}\n{first['text']}"
    assert any(line.startswith("warning:") and "repeats 1 document id(s)" in line for line in logged)

    from flows.train.synthetic import SyntheticParams, pseudo_queries

    drawn = pseudo_queries(data / "corpus.jsonl", SyntheticParams(queries=1000, keep_sentence=1.0))
    assert len({p.qid for p in drawn}) == len(drawn), "a repeated id gave two pseudo-queries"
    assert [p.positive.split("\n")[0] for p in drawn if p.docno == positive] == [first["title"]]


def test_judgements_that_match_nothing_are_warned_with_counts_and_the_dataset_is_recorded_absolute(
        base, home, tmp_path, monkeypatch):
    from flows.train.mining import mine
    from flows.train.recipe import load_recipe

    qrels = qrels_rows(base, "train")
    spoiled = qrels + [(qrels[0][0], "doc-nowhere", "1"), ("q-nowhere", qrels[0][1], "1")]
    data = _variant(base, tmp_path / "unmatched", qrels=spoiled)
    flow, training = load_recipe(data / "recipe.yaml")
    monkeypatch.chdir(tmp_path)
    logged: list[str] = []
    mined = mine(Path("unmatched"), flow, params=training.mining, index_dir=tmp_path / "indices", progress=False,
                 log=logged.append)
    warnings = [line for line in logged if line.startswith("warning:")]
    assert len(warnings) == 2, logged
    assert f"1 of {len(qrels) + 1} relevant judgements" in warnings[0] and "'doc-nowhere'" in warnings[0]
    assert "1 query id(s) judged" in warnings[1] and "queries.jsonl" in warnings[1]
    stats = mined.stats
    assert (stats["positives_missing_from_corpus"], stats["qrels_queries_not_in_queries"]) == (1, 1)
    assert stats["dataset"] == str(tmp_path / "unmatched")  # not "unmatched": training.json is read elsewhere


def test_each_model_records_and_reports_its_own_counts(base, home, tmp_path):
    from flows.train.examples import counts, describe, own_examples
    from flows.train.mining import mine
    from flows.train.recipe import load_recipe

    flow, training = load_recipe(base / "recipe.yaml")
    mined = mine(base, flow, params=training.mining, synthetic=training.synthetic, index_dir=tmp_path / "indices",
                 progress=False, log=lambda _: None)
    judged = [e for e in mined.examples if not e.get("synthetic")]
    ce = counts("cross-encoder", training.cross_encoder,
                own_examples("cross-encoder", mined.examples, ["cross-encoder"]), mined.stats)
    bi = counts("bi-encoder", training.bi_encoder, own_examples("bi-encoder", mined.examples, ["cross-encoder"]),
                mined.stats)
    queries = len({e["qid"] for e in judged})
    assert ce == {"examples": len(judged) + 6, "judged_examples": len(judged), "pseudo_examples": 6, "queries": queries,
                  "negatives_per_example": 2, "mined_negatives_per_example": 3}
    assert (bi["examples"], bi["pseudo_examples"], bi["negatives_per_example"]) == (len(judged), 0, 1)
    assert describe(ce) == f"{len(judged) + 6} examples ({len(judged)} judged from {queries} queries, 6 pseudo), " \
                           "2 negatives each"


@pytest.mark.slow
def test_an_interrupted_cross_encoder_resumes_after_its_last_finished_epoch(base, home, tmp_path):
    """Ctrl-C right after epoch 1 of 2 is saved (the log line that says so raises it); the same command goes on at
    epoch 2 and makes the model an uninterrupted run makes. A run with other settings starts over, in one line.
    (Trains five tiny models.)"""
    import numpy as np
    import torch
    from sentence_transformers import CrossEncoder

    from flows.train.recipe import train

    options = _options(base, tmp_path, models=["cross-encoder"], epochs=2, max_steps=None)
    staging = tmp_path / "models" / ".tessera-cross-encoder.resume"

    def ctrl_c_after_epoch_1(line: str) -> None:
        if line.startswith("cross-encoder: epoch 1 done; saved in"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(options, log=ctrl_c_after_epoch_1)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [staging.name], "a model or temporary folder"
    lines: list[str] = []
    record = train(options, log=lines.append).models[0].record
    assert [line for line in lines if "resuming" in line] == [
        f"cross-encoder: resuming the interrupted run after epoch 1 ({record['training']['steps'] // 2} steps done; "
        f"state in {staging})"]
    assert record["training"]["resumed_from"] == {"stage": 0, "epoch": 1} and not staging.exists()

    whole = train(_options(base, tmp_path, models=["cross-encoder"], epochs=2, max_steps=None,
                           output=tmp_path / "whole"), log=lambda _: None).models[0].record
    assert "resumed_from" not in whole["training"] and record["config_key"] == whole["config_key"]
    assert (record["training"]["steps"], record["training"]["first_loss"]) == (
        whole["training"]["steps"], whole["training"]["first_loss"])
    query = json.loads((base / "queries.jsonl").read_text(encoding="utf-8").splitlines()[0])["text"]
    docs = [json.loads(line)["text"] for line in (base / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:4]]
    scores = [CrossEncoder(str(folder / "tessera-cross-encoder"), local_files_only=True, device="cpu").predict(
        [(query, doc) for doc in docs], activation_fn=torch.nn.Identity()) for folder in (tmp_path / "models",
                                                                                          tmp_path / "whole")]
    assert np.allclose(scores[0], scores[1], atol=1e-4), scores

    with pytest.raises(KeyboardInterrupt):  # another seed (the model with seed 7 is there: it would be reused)
        train(_options(base, tmp_path, models=["cross-encoder"], epochs=2, max_steps=None, seed=8),
              log=ctrl_c_after_epoch_1)
    lines.clear()
    other = train(_options(base, tmp_path, models=["cross-encoder"], epochs=2, max_steps=None, seed=9),
                  log=lines.append).models[0].record
    assert [line for line in lines if "not resuming" in line] == [
        f"cross-encoder: not resuming the interrupted run in {staging}: seed, examples changed; starting over"]
    assert "resumed_from" not in other["training"] and not staging.exists()

    recipe = tmp_path / "follow-up.yaml"  # interrupted in the follow-up schedule: the main one is not run again
    recipe.write_text(RECIPE.replace("cross_encoder: {", "cross_encoder: {then: {epochs: 2}, "), encoding="utf-8")
    follow_up = {"models": ["cross-encoder"], "max_steps": None, "spec": recipe}

    def ctrl_c_in_the_follow_up(line: str) -> None:
        if line.startswith("cross-encoder: epoch 1 of stage 2 done"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(_options(base, tmp_path, **follow_up), log=ctrl_c_in_the_follow_up)
    record = train(_options(base, tmp_path, **follow_up), log=lambda _: None).models[0].record
    whole = train(_options(base, tmp_path, output=tmp_path / "whole", **follow_up), log=lambda _: None).models[0].record
    assert record["training"]["resumed_from"] == {"stage": 1, "epoch": 1}
    assert record["training"]["steps"] == whole["training"]["steps"]
    assert record["training"]["last_loss_mean20"] == pytest.approx(whole["training"]["last_loss_mean20"], abs=1e-4)

    bi_encoder = _options(base, tmp_path, epochs=2, max_steps=None)  # the bi-encoder resumes the same way

    def ctrl_c_after_its_epoch_1(line: str) -> None:
        if line.startswith("bi-encoder: epoch 1 done; saved in"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(bi_encoder, log=ctrl_c_after_its_epoch_1)
    record = train(bi_encoder, log=lambda _: None).models[0].record
    assert record["training"]["resumed_from"] == {"stage": 0, "epoch": 1}
    assert not (tmp_path / "models" / ".tessera-bi-encoder.resume").exists()


def test_train_list_shows_each_trained_model_with_its_kind_base_examples_and_date(base, home, tmp_path, capsys,
                                                                                    monkeypatch):
    from flows.commands import main
    from flows.train.recipe import train

    models = tmp_path / "models"
    train(_options(base, tmp_path, models=["cross-encoder", "bi-encoder"]), log=lambda _: None)
    (models / "notes").mkdir()  # no training.json: not a checkpoint, not listed
    capsys.readouterr()
    assert main(["train", "--list", "--output", str(models), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["folder"] == str(models) and [r["name"] for r in listed["models"]] == [
        "tessera-bi-encoder", "tessera-cross-encoder"]
    for row in listed["models"]:
        record = json.loads((models / row["name"] / "training.json").read_text(encoding="utf-8"))
        assert row == {"name": row["name"], "kind": record["kind"], "base": "all-MiniLM-L6-v2",
                       "dataset": str(base), "split": "train", "examples": record["counts"]["examples"],
                       "judged_examples": record["counts"]["judged_examples"],
                       "pseudo_examples": record["counts"]["pseudo_examples"], "steps": 1,
                       "trained_at": record["saved_at"], "path": str(models / row["name"])}
    assert listed["models"][1]["pseudo_examples"] == 6 and listed["models"][0]["pseudo_examples"] == 0

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))  # the default folder: $TESSERA_HOME/models
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["train", "--list"]) == 0
    table = capsys.readouterr().out
    ce = listed["models"][1]
    assert f"tessera-cross-encoder │ cross-encoder │ all-MiniLM-L6-v2 │ {ce['examples']} " \
           f"({ce['judged_examples']} judged, 6 pseudo) │ {ce['trained_at']}" in table
    monkeypatch.setenv("COLUMNS", "70")  # a narrow log: names and paths fold onto more lines, never cut with "…"
    assert main(["train", "--list"]) == 0
    narrow = capsys.readouterr().out
    assert "…" not in narrow and "tessera-cross-encoder" in "".join(
        line.split("│")[1].strip() for line in narrow.splitlines() if line.count("│") > 2), narrow
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "empty"))
    assert main(["train", "--list"]) == 0
    assert "no model trained into" in capsys.readouterr().err
    assert main(["train", "--list", "--output", str(models / "tessera-bi-encoder" / "training.json")]) == 2
    assert "is a file, not a folder of trained models" in capsys.readouterr().err


def test_colberts_progress_bar_shows_the_mean_loss_as_the_other_kinds_do(base, tmp_path, capsys, monkeypatch):
    import re

    from flows.train import step_bar
    from flows.train.colbert import train_colbert

    monkeypatch.setattr(step_bar, "LINE_SECONDS", 0.0)  # off a terminal, a line after every step

    docs = [json.loads(line) for line in (base / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:8]]
    examples = [{"query": d["title"], "positive": d["text"], "negatives": [docs[(i + 1) % 8]["text"]]}
                for i, d in enumerate(docs)]
    path = train_colbert(examples, output_dir=tmp_path / "colbert", batch_size=2, max_steps=3, doc_maxlen=32,
                         progress=True)
    losses = json.loads((path / "training.json").read_text(encoding="utf-8"))["losses"]
    shown = re.findall(r"loss ([0-9.]+)", capsys.readouterr().err)
    means = [f"{sum(losses[:k]) / k:.3f}" for k in (1, 2, 3)]  # after each step: the mean of the steps so far
    assert len(losses) == 3 and list(dict.fromkeys(shown)) == means, (shown, losses)
    assert f"{losses[1]:.3f}" not in shown, "a step's own loss was shown"


def test_a_recipe_with_a_step_that_does_not_build_is_refused_naming_the_file(tmp_path):
    """Its error named the step and field alone, not the recipe file, and came when mining built the flow."""
    from flows.train.recipe import load_recipe
    from operators.errors import UnknownOperatorError

    recipe = tmp_path / "badop.yaml"
    recipe.write_text(RECIPE.replace("op: retrieve.bm25", "op: no.such_op"), encoding="utf-8")
    with pytest.raises(UnknownOperatorError) as err:
        load_recipe(recipe)
    assert err.value.message.startswith(f"{recipe}: unknown operator 'no.such_op'") and err.value.step == "bm25"


def test_a_ctrl_c_after_a_saved_epoch_says_the_same_command_resumes_quiet_or_not(base, home, tmp_path, capsys,
                                                                                  monkeypatch):
    """``tessera: interrupted`` alone, and with --quiet the line saying the epoch was saved is not shown either:
    the last word says what is kept and how to go on."""
    from flows.commands import main
    from flows.train import resume

    saved = resume.EpochState.save

    def save_then_ctrl_c(self, **state):
        saved(self, **state)
        raise KeyboardInterrupt

    monkeypatch.setattr(resume.EpochState, "save", save_then_ctrl_c)
    args = ["train", "--dataset", str(base), "--spec", str(base / "recipe.yaml"), "--model", "bi-encoder",
            "--epochs", "2", "--output", str(tmp_path / "models"), "--quiet"]
    capsys.readouterr()
    assert main(args) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2:] == ["tessera: bi-encoder's finished epochs are saved: the same command resumes after them",
                        "tessera: interrupted"], err
