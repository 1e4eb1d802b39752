"""``tessera train --quiet`` shows no progress bar: neither Tessera's own nor those of the libraries it trains with
(transformers' "Loading weights" of the base model and "Writing model shards" of the checkpoint), which a process
shows by default; they are as they were after the run. Nor the libraries' notes, logged as warnings:
sentence-transformers' "Converting SentenceTransformer model ... to CrossEncoder" and transformers' "LOAD REPORT" of
the new classification head. A tiny BEIR folder written here (12 documents, 4 train queries), mined with BM25 and one
training step of the cross-encoder, in-process (``flows.commands.main``), and once as the installed command."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

#: What the libraries log while the cross-encoder loads its base: nothing a --quiet user should see.
LIBRARY_NOTES = ("to CrossEncoder", "LOAD REPORT", "MISSING")

TOPICS = ["honey bees pollinate crops", "opera singers train their voices", "glaciers carve valleys slowly",
          "gothic cathedrals have flying buttresses", "vitamin d strengthens bones", "comets have icy tails"]
RECIPE = """\
name: tiny-quiet
steps:
  bm25: {op: retrieve.bm25, params: {k: 12}}
training:
  split: train
  mining: {skip_top: 0, negatives: 3, seed: 7}
  cross_encoder: {epochs: 1, batch_size: 2, max_length: 32, negatives: 2, train_layers: 1}
"""


@pytest.fixture
def dataset(tmp_path):
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}{j}", "title": topic.split()[0], "text": f"{topic}, say report number {j}."}
            for i, topic in enumerate(TOPICS) for j in range(2)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": f"q{i}", "text": topic.split(" ", 1)[1]} for i, topic in enumerate(TOPICS[:4])]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                                + "".join(f"q{i}\td{i}0\t1\n" for i in range(4)))
    (folder / "recipe.yaml").write_text(RECIPE)
    return folder


@pytest.mark.integration
def test_train_quiet_shows_no_progress_bar_or_note_of_its_own_or_of_the_libraries(dataset, tmp_path, monkeypatch,
                                                                                   capsys, caplog):
    """A library's warning that reaches the root logger is one the terminal of a ``tessera`` process shows (Python's
    last-resort handler; here pytest's ``caplog``); transformers logs through a handler of its own, so it passes
    its records on to the root here (``enable_propagation``), as transformers does on CI."""
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as hf_logging

    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    shown, hub_hidden = hf_logging.is_progress_bar_enabled(), hub_utils.are_progress_bars_disabled()
    levels = {name: logging.getLogger(name).level for name in ("transformers", "sentence_transformers")}
    propagates = logging.getLogger("transformers").propagate
    hf_logging.enable_progress_bar()  # as a new process has them (a model loaded by an operator turns them off)
    hf_logging.set_verbosity_warning()  # as a new process has it (the ColBERT operator lowers it while it loads)
    logging.getLogger("sentence_transformers").setLevel(logging.NOTSET)
    hf_logging.enable_propagation()
    try:
        capsys.readouterr()
        with caplog.at_level(logging.WARNING):
            assert main(["train", "--dataset", str(dataset), "--spec", str(dataset / "recipe.yaml"), "--model",
                         "cross-encoder", "--max-steps", "1", "--output", str(tmp_path / "models"), "--quiet"]) == 0
        err = capsys.readouterr().err
        assert (tmp_path / "models" / "tessera-cross-encoder" / "training.json").is_file()
        for bar in ("Loading weights", "Writing model shards", "it/s", "\r"):
            assert bar not in err, err
        for note in LIBRARY_NOTES:
            assert note not in err + caplog.text, err + caplog.text
        assert hf_logging.is_progress_bar_enabled() and not hub_utils.are_progress_bars_disabled()  # as before
        assert hf_logging.get_verbosity() == logging.WARNING  # as before
        assert logging.getLogger("sentence_transformers").level == logging.NOTSET

        monkeypatch.setenv("COLUMNS", "400")  # the summary table's cells on one line each
        assert main(["train", "--dataset", str(dataset), "--spec", str(dataset / "recipe.yaml"), "--model",
                     "cross-encoder", "--max-steps", "2", "--output", str(tmp_path / "models"), "--quiet"]) == 0
        replaced = capsys.readouterr()  # another config retrains: where the checkpoint it replaced went is said
        kept = [p.name for p in (tmp_path / "models").iterdir() if p.name.startswith("tessera-cross-encoder-previous-")]
        assert len(kept) == 1 and f"the checkpoint it replaced is kept as {kept[0]}" in replaced.out, replaced.out
    finally:  # as they were before this test
        (hf_logging.enable_progress_bar if shown else hf_logging.disable_progress_bar)()
        (hub_utils.disable_progress_bars if hub_hidden else hub_utils.enable_progress_bars)()
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        logging.getLogger("transformers").propagate = propagates


@pytest.mark.integration
def test_off_a_terminal_the_libraries_bars_are_hidden_and_tesseras_own_lines_stay(dataset, tmp_path, monkeypatch,
                                                                                 capsys):
    """A log (pytest's stderr, a file, a job's) got transformers' "Loading weights" and "Writing model shards" bars,
    redraws joined by carriage returns, beside Tessera's own progress lines: the bars are hidden there."""
    from transformers.utils import logging as hf_logging

    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()  # as a new process has them
    try:
        capsys.readouterr()
        assert main(["train", "--dataset", str(dataset), "--spec", str(dataset / "recipe.yaml"), "--model",
                     "cross-encoder", "--max-steps", "1", "--output", str(tmp_path / "models")]) == 0
        err = capsys.readouterr().err
        assert "cross-encoder: step 1/1" in err, err  # Tessera's own line, off a terminal
        for bar in ("Loading weights", "Writing model shards", "\r"):
            assert bar not in err, err
        assert hf_logging.is_progress_bar_enabled()  # as before
    finally:
        (hf_logging.enable_progress_bar if shown else hf_logging.disable_progress_bar)()


@pytest.mark.slow
def test_installed_train_quiet_prints_its_table_alone(dataset, tmp_path):
    """The command as a user runs it: with --quiet, stderr stays empty and stdout holds the summary table."""
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env.pop("TESSERA_DEBUG", None)
    done = subprocess.run([str(os.path.join(os.path.dirname(sys.executable), "tessera")), "train", "--dataset",
                           str(dataset), "--spec", str(dataset / "recipe.yaml"), "--model", "cross-encoder",
                           "--max-steps", "1", "--output", str(tmp_path / "models"), "--quiet"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    assert "tessera-cross-encoder" in done.stdout and "made in" in done.stdout, done.stdout


@pytest.mark.parametrize("prefix", ["a/b", "", "../up"])
def test_a_name_prefix_that_is_no_name_is_refused_before_anything_is_mined(dataset, tmp_path, monkeypatch, capsys,
                                                                           prefix):
    """'a/b' trained into a folder a/ as 'b-cross-encoder' (a Hugging Face id's shape), '' into '-cross-encoder'."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    assert main(["train", "--dataset", str(dataset), "--name-prefix", prefix, "--output", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert f"bad --name-prefix {prefix!r}" in err and "letters, digits" in err, err
    assert not (tmp_path / "m").exists()
