"""``tessera train``'s refusals of its options and its recipe, said in one line naming what is wrong, before any
mining; none needs a dataset's contents (what does: ``test_train_checks``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.train.errors import TrainError
from flows.train.recipe import TrainOptions, train


def _options(tmp_path: Path, **changes) -> TrainOptions:
    dataset = tmp_path / "dataset"
    dataset.mkdir(exist_ok=True)
    values = {"dataset": dataset, "models": ["bi-encoder"], "max_steps": 1, "output": tmp_path / "models",
              "index_dir": tmp_path / "indices", "progress": False, **changes}
    return TrainOptions(**values)


def test_an_index_dir_that_is_a_file_is_refused_naming_the_option_before_mining(tmp_path, monkeypatch):
    """It was ``internal error: FileExistsError`` once mining began to build its index."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    taken = tmp_path / "taken"
    taken.write_text("a file", encoding="utf-8")
    for index_dir in (taken, taken / "deeper"):
        lines: list[str] = []
        with pytest.raises(TrainError, match=f"--index-dir {index_dir} is not a folder") as err:
            train(_options(tmp_path, index_dir=index_dir), log=lines.append)
        assert err.value.field == "index_dir" and lines == [], "it mined before refusing"


def test_an_output_that_cannot_be_written_is_refused_naming_the_option_before_mining(tmp_path, monkeypatch):
    """It was ``internal error: FileNotFoundError`` (or PermissionError) when the first model was saved, after
    mining. /proc takes no new file even for root, whom a read-only mode does not stop."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    lines: list[str] = []
    with pytest.raises(TrainError, match=r"--output /proc/tessera-out cannot be written \(.* in /proc\)") as err:
        train(_options(tmp_path, output=Path("/proc/tessera-out")), log=lines.append)
    assert err.value.field == "output" and lines == [], "it mined before refusing"


@pytest.mark.parametrize("text, problem", [
    (b"name: x\nsteps: {}\ntraining: {split: train, split: dev}\n", "the key 'split' is given twice in one mapping"),
    (b"name: caf\xe9\nsteps: {}\n", "not a spec (the file is not UTF-8 text: byte 0xe9 at byte 10, line 1)"),
])
def test_a_recipe_whose_text_is_bad_is_an_error_of_spec_naming_the_file(tmp_path, text, problem):
    """A key given twice was said as the option of that name (``field '--split'``); a file that is not UTF-8 text was
    ``internal error: UnicodeDecodeError``."""
    from flows.train.recipe import load_recipe

    recipe = tmp_path / "recipe.yaml"
    recipe.write_bytes(text)
    with pytest.raises(TrainError) as err:
        load_recipe(recipe)
    assert err.value.field == "spec" and err.value.message.startswith(f"{recipe}: {problem}"), err.value.message


def test_a_run_of_static_alone_refuses_the_options_of_training_on_data_before_distilling(tmp_path, monkeypatch):
    """``--model static --epochs 3 --dataset D`` distilled (or reused) the one model and said nothing of either."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    with pytest.raises(TrainError, match=r"--model static is distilled from its base alone and takes no --dataset, "
                       r"--epochs or --max-steps: leave them out, or add a --model that trains on a dataset") as err:
        train(_options(tmp_path, models=["static"], epochs=3), log=lambda _: None)
    assert err.value.field == "dataset" and not (tmp_path / "models").exists()
    with pytest.raises(TrainError, match="takes no --split: leave it out") as err:
        train(_options(tmp_path, models=["static"], dataset=None, max_steps=None, split="train"), log=lambda _: None)
    assert err.value.field == "split"


@pytest.mark.parametrize("extra, named", [
    (["--epochs", "3"], "--epochs would be ignored: leave it out"),
    (["--model", "x", "--seed", "4", "--force"], "--model, --seed and --force would be ignored: leave them out"),
])
def test_list_refuses_the_options_of_a_training_run_naming_them(tmp_path, monkeypatch, capsys, extra, named):
    """``--list --epochs 3`` listed the models and ignored ``--epochs`` without a word; ``--output`` and ``--json``,
    which ``--list`` reads, still go with it."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    assert main(["train", "--list", *extra]) == 2
    assert f"--list trains nothing, so {named}, or drop --list to train" in capsys.readouterr().err
    assert main(["train", "--list", "--json", "--quiet", "--output", str(tmp_path / "models")]) == 0
    assert '"models": []' in capsys.readouterr().out


@pytest.mark.parametrize("argv, said", [
    (["train", "--seed", "x"], "argument --seed: 'x' is not a whole number"),
    (["train", "--epochs", "x"], "argument --epochs: 'x' is not a whole number"),
    (["bench", "--limit", "x"], "argument --limit: 'x' is not a whole number"),
    (["cache", "prune", "--older-than", "x"], "argument --older-than: 'x' is not a number"),
])
def test_a_numeric_option_that_is_no_number_is_refused_in_tesseras_words(capsys, argv, said):
    """``--seed x`` said argparse's ``invalid int value: 'x'`` where ``--epochs x`` said Tessera's words."""
    from flows.commands import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize("section, field, said", [
    ("cross_encoder: {learning_rate: 0.1}", "training.cross_encoder.learning_rate",
     "unknown field (fields: base, batch_size, epochs, head_lr, in_batch_negatives, lr, max_length, negatives,"),
    ("minning: {negatives: 3}", "training.minning", "unknown field; did you mean 'mining'? (fields: bi_encoder,"),
    ("cross_encoder: {then: {epoch: 2}}", "training.cross_encoder.then.epoch",
     "unknown field; did you mean 'epochs'? (fields: epochs, head_lr, lr)"),
    ("datasets: [../hotpotqa]", "training.datasets.0",
     "must be a mapping of allow_eval_split, dataset, split, not '../hotpotqa'"),
    ("mining: {negatives: many}", "training.mining.negatives", "must be a whole number (got 'many')"),
    ("split: no", "training.split", "must be a string (got false); YAML reads unquoted no"),
    # pydantic read `true` as 1 for a number: lr 1.0, one epoch, trained without a word
    ("cross_encoder: {lr: true}", "training.cross_encoder.lr", "must be a number, not true"),
    ("cross_encoder: {then: {epochs: yes}}", "training.cross_encoder.then.epochs", "must be a number, not true"),
    ("synthetic: {corpora: [{corpus: x, queries: on}]}", "training.synthetic.corpora.0.queries",
     "must be a number, not true"),
])
def test_a_recipes_bad_training_field_is_one_line_in_a_recipe_authors_words(tmp_path, monkeypatch, capsys, section,
                                                                          field, said):
    """An unknown field was "unknown field" alone (a ``learning_rate`` where the recipe says ``lr``, a misspelt
    section), an entry of ``datasets`` written as a path was "a valid dictionary or instance of LabelledSet", and a
    value of the wrong kind was pydantic's "Input should be a valid integer, unable to parse string as an integer"."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"steps:\n  bm25: {{op: retrieve.bm25, params: {{k: 30}}}}\ntraining:\n  {section}\n",
                      encoding="utf-8")
    (tmp_path / "dataset").mkdir()
    assert main(["train", "--dataset", str(tmp_path / "dataset"), "--spec", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tessera: error: field '{field}': {recipe}: {said}"), err
    assert err.count("\n") == 1 and not (tmp_path / "home").exists(), "it read more than the recipe"
