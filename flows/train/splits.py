"""Which labelled data training reads: a dataset's training split, never an evaluation split (``test``, ``dev``)
unless the set is a training set whose only qrels file has that name (``allow_eval_split``), and the other labelled
sets a recipe names (``LabelledSet``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from flows.train.errors import TrainError

EVALUATION_SPLITS = frozenset({"test", "dev", "validation", "val"})


class LabelledSet(BaseModel):
    """Another BEIR-layout dataset whose judged queries are mined too, on its own index (``training.datasets``,
    or a repeated ``--dataset``)."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(description="A BEIR-layout folder (a relative path is read from the working directory, like "
                         "--dataset).")
    split: str = Field("train", description="Its qrels split (never test/dev, unless allow_eval_split).")
    allow_eval_split: bool = Field(False, description="It is a training set whose only qrels file is test.tsv "
                                   "(hotpotqa_train100_hipporag, musique_train100_hipporag).")


def check_split(split: str, allow_eval_split: bool) -> None:
    if split.lower() in EVALUATION_SPLITS and not allow_eval_split:
        raise TrainError(f"split '{split}' is an evaluation split and is never used for training; train on "
                         "qrels/train.tsv (--split train), or pass --allow-eval-split for a set that is a training "
                         "set whose only qrels file is test.tsv (hotpotqa_train100_hipporag, "
                         "musique_train100_hipporag)", field="split")


def _check_split_there(root: Path, split: str, allow_eval_split: bool) -> None:
    """A missing split named with those training may read: 'the only split there is test: give --split test' was
    the benchmark's advice, which ``check_split`` then refused."""
    from operators.sources._beir_files import qrels_splits

    splits = qrels_splits(root) if root.is_dir() and not (root / "qrels" / f"{split}.tsv").is_file() else []
    usable = [s for s in splits if allow_eval_split or s.lower() not in EVALUATION_SPLITS]
    if splits and len(usable) < len(splits):
        there = (f"give --split {usable[0]}" if len(usable) == 1 else f"give --split with one of {', '.join(usable)}"
                 if usable else f"add qrels/{split}.tsv of training judgements, or give --split {splits[0]} "
                 "--allow-eval-split if the set is a training set whose only qrels file has that name")
        raise TrainError(f"no qrels file '{root / 'qrels' / split}.tsv' (splits there: {', '.join(splits)}; "
                         f"{', '.join(s for s in splits if s not in usable)} is for evaluation, which training never "
                         f"reads: {there})", field="split")


def load_training_split(folder: str | Path, split: str, *, limit: int | None = None,
                        allow_eval_split: bool = False, where: str = ""):
    """The dataset (``flows.bench.dataset.Dataset``) restricted to ``split``; refuses evaluation splits.

    ``where`` prefixes the field an error names (``training.datasets.0``: ``training.datasets.0.split``)."""
    from flows.bench.dataset import load_dataset
    from flows.bench.errors import BenchError

    try:
        check_split(split, allow_eval_split)
        _check_split_there(Path(folder).expanduser(), split, allow_eval_split)
        # no TREC run is written, and pseudo-queries need no judgement
        return load_dataset(folder, split=split, limit=limit, benchmarked=False)
    except (BenchError, TrainError) as err:
        raise TrainError(err.message, field=f"{where}.{err.field}" if where else err.field) from None
