"""A training recipe's file: its ``training`` section (``TrainingSection``: the split, the mining choices, each
kind's hyperparameters, and ``makes``, what the recipe is run for), reading a recipe (``load_recipe``), and the
``tessera train`` command that makes a model (``train_command``). Apart from ``flows.train.recipe``, which runs a
recipe and re-exports these names, so that reading a recipe and running one each read alone."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flows import store
from flows.train.bi_encoder import BiEncoderParams
from flows.train.cross_encoder import CrossEncoderParams
from flows.train.errors import TrainError
from flows.train.mining import MiningParams
from flows.train.splits import LabelledSet
from flows.train.static import StaticParams
from flows.train.synthetic import ModelKind, SyntheticParams
from operators.errors import SpecError

#: what ``tessera train`` makes: the kinds trained on mined examples, and ``static`` (distilled from a model alone)
Kind = Literal[ModelKind, "static"]
KINDS: tuple[str, ...] = get_args(Kind)
#: kinds made without a dataset: a run of only these needs no --dataset and mines nothing
DATA_FREE_KINDS = ("static",)
SECTION = "training"
#: The built-in recipes.
RECIPES_DIR = store.RECIPES_DIR


class ColbertParams(BaseModel):
    """Hyperparameters handed to ``flows.train.colbert.train_colbert``."""

    model_config = ConfigDict(extra="forbid")

    base: str = Field("minilm", description="Model to start from (or another kind this run trains, as for the "
                      "cross-encoder).")
    epochs: int = Field(1, gt=0, description="Passes over the examples.")
    batch_size: int = Field(8, gt=0, description="Examples per step.")
    lr: float = Field(3e-5, gt=0, description="Peak learning rate.")
    negatives: int = Field(3, gt=0, description="Mined hard negatives per example (the first N).")


class Makes(BaseModel):
    """What a recipe is run for: ``tessera train --spec RECIPE`` with these options makes ``PREFIX-KIND``."""

    model_config = ConfigDict(extra="forbid")

    name_prefix: str = Field("tessera", description="The --name-prefix it is run with.")
    models: list[Kind] = Field(min_length=1, description="The kinds it is run for (--model).")
    dataset: str = Field(description="The dataset it is run on (--dataset), from the repository root.")
    split: str | None = Field(None, description="--split, when not the recipe's own.")
    allow_eval_split: bool = Field(False, description="--allow-eval-split: a training set whose only qrels file "
                                   "is test.tsv.")


class TrainingSection(BaseModel):
    """The ``training`` section of a recipe spec."""

    model_config = ConfigDict(extra="forbid")

    makes: Makes | None = Field(None, description="The models this recipe is run for and how; names a flow needs "
                                "are looked up here (train_command).")
    split: str = Field("train", description="qrels split the examples come from (never test/dev).")
    mining: MiningParams = Field(default_factory=MiningParams, description="How hard negatives are drawn.")
    datasets: list[LabelledSet] = Field(default_factory=list, description="More labelled datasets mined besides "
                                        "--dataset; their examples follow its examples.")
    synthetic: SyntheticParams = Field(default_factory=SyntheticParams,
                                       description="Pseudo-queries drawn from the corpus (none by default).")
    cross_encoder: CrossEncoderParams = Field(default_factory=CrossEncoderParams,
                                              description="Cross-encoder hyperparameters.")
    bi_encoder: BiEncoderParams = Field(default_factory=BiEncoderParams, description="Bi-encoder hyperparameters.")
    colbert: ColbertParams = Field(default_factory=ColbertParams, description="ColBERT hyperparameters.")
    static: StaticParams = Field(default_factory=StaticParams, description="How the static model is distilled.")

    def params(self, kind: str) -> BaseModel:
        return {"cross-encoder": self.cross_encoder, "bi-encoder": self.bi_encoder, "colbert": self.colbert,
                "static": self.static}[kind]


recipe_names = store.recipe_names


def recipe_path(source: str | Path) -> Path:
    """A recipe file: a path, or the name of a built-in recipe."""
    path = Path(source)
    if path.is_file():
        return path
    builtin = RECIPES_DIR / f"{source}.yaml"
    if builtin.is_file():
        return builtin
    raise TrainError(f"no training recipe file or built-in recipe named '{source}' (built-in recipes: "
                     f"{', '.join(recipe_names())})", field="spec")


def load_recipe(source: str | Path):
    """(mining ``FlowSpec``, ``TrainingSection``) from a recipe file or built-in recipe name."""
    from flows.spec import FlowSpec
    from flows.train.errors import read_recipe, section_error
    from operators.params import bool_for_number

    path = recipe_path(source)
    data = read_recipe(path)
    section = data.pop(SECTION, None) or {}
    if found := bool_for_number(TrainingSection, section):  # pydantic trained `lr: true` at a learning rate of 1.0
        raise TrainError(f"{path}: {found[1]}", field=f"{SECTION}.{found[0]}")
    try:
        training = TrainingSection.model_validate(section)
    except ValidationError as err:
        raise section_error(err, path, TrainingSection, SECTION) from None
    try:
        spec = FlowSpec.parse(data)
        spec.build()  # checked now, naming the recipe: it was built to mine, after the dataset was read
    except SpecError as err:  # named by its step and field alone, the recipe file was not
        raise type(err)(f"{path}: {err.message}", step=err.step, op=err.op, field=err.field) from None
    return spec, training


def model_name(prefix: str, kind: str) -> str:
    return f"{prefix}-{kind}"


def dataset_option(dataset: str, placeholder: bool = False) -> str:
    """How ``train_command`` names a recipe's dataset: its path (from the repository root, as the recipe reads it)
    when that folder is there, else, or with ``placeholder``, a stand-in that names it (``<path-to-scifact>``): the
    recipe's ``../shared/data/scifact`` is the clone's layout, which neither a user elsewhere nor a client of the
    service has."""
    if not placeholder and Path(dataset).is_dir():
        return dataset
    return f"<path-to-{Path(dataset).name or 'dataset'}>"


@functools.lru_cache(maxsize=32)
def _training_of(path: Path, mtime_ns: int, size: int) -> TrainingSection:
    """The recipe's training section, read once per version of its file (shared: read only). ``train_command`` read
    every recipe for each missing model of each flow the service lists."""
    return load_recipe(path)[1]


def train_command(name: str, placeholder: bool = False) -> str | None:
    """The ``tessera train`` command that makes the model ``name`` with a built-in recipe (after the one
    that makes its base, when that is a trained model not here yet), or None when no recipe makes it.
    ``placeholder``: the dataset by a stand-in, whether or not its folder is here (``dataset_option``)."""
    from operators.models import ModelNotFoundError, resolve_model_path

    for recipe in recipe_names():
        stat = (path := recipe_path(recipe)).stat()
        training = _training_of(path, stat.st_mtime_ns, stat.st_size)
        makes = training.makes
        kind = next((k for k in (makes.models if makes else ()) if model_name(makes.name_prefix, k) == name), None)
        if kind is None:
            continue
        data = kind not in DATA_FREE_KINDS
        options = [f"--dataset {dataset_option(makes.dataset, placeholder)}"] if data else []
        options += [f"--split {makes.split}"] if makes.split and data else []
        options += ["--allow-eval-split"] if makes.allow_eval_split and data else []
        options += [f"--spec {recipe}"] if recipe != "train" else []
        options += [f"--model {kind}"]
        options += [f"--name-prefix {makes.name_prefix}"] if makes.name_prefix != "tessera" else []
        command = "tessera train " + " ".join(options)
        base = getattr(training.params(kind), "base")
        try:
            resolve_model_path(base)
        except ModelNotFoundError:
            first = train_command(base, placeholder) if base != name else None
            return f"{first}, then {command}" if first else command
        return command
    return None
