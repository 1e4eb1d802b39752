"""The training recipe: mine hard negatives once, then train each requested model, cached.

A recipe is a spec file (``flows/train/recipes/train.yaml`` by default; the built-in recipes live in that folder,
apart from the flows): its ``steps`` are the mining flow (a normal flow spec, run over the training queries by
``flows.train.mining``) and its ``training`` section (``TrainingSection``) holds the split, the mining choices and
each model's hyperparameters. ``train(options)`` mines, then trains the kinds asked for into
``<output>/<prefix>-<kind>`` (default ``$TESSERA_HOME/models/tessera-cross-encoder`` etc., the names the built-in
``hybrid_ce`` / ``hybrid_colbert`` / ``hybrid_ft`` flows load). A checkpoint whose ``training.json`` records the
same config key is reused; another key (or ``force``) trains a new one, and the checkpoint it replaces is kept
beside it (``checkpoints.kept_as``); ``force`` also replaces a folder there that is no checkpoint (refused
otherwise, before any mining: ``checkpoints.check_destination``). A recipe's ``training.makes`` says which models
it is run for and how (``train_command``), so a flow that needs one of them can say which command makes it. The
``static`` kind is distilled from its base alone (``flows.train.static``): a run of only that kind needs no dataset
and mines nothing.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flows import store
from flows.train import checkpoints
from flows.train.bi_encoder import BiEncoderParams
from flows.train.cross_encoder import CrossEncoderParams
from flows.train.errors import TrainError
from operators.errors import SpecError
from flows.train.examples import check_judged, counts, own_examples, warn_too_few
from flows.train.quiet import quiet_libraries
from flows.train.mining import LabelledSet, MiningParams
from flows.train.resume import RESUMABLE, EpochState, staging_folder
from flows.train.static import StaticParams, check_data_options
from flows.train.synthetic import ModelKind, SyntheticParams
from flows.train.trainers import colbert_trainer, run_trainer

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


@dataclass
class TrainOptions:
    dataset: str | Path | None  # None only when every kind asked for is data-free (static)
    more_datasets: list[str | Path] = field(default_factory=list)  # mined too, with the same split
    models: list[str] = field(default_factory=lambda: ["cross-encoder"])  # kinds, or ["all"]
    spec: str | Path = "train"
    split: str | None = None  # default: the recipe's
    epochs: int | None = None  # every kind trains this many epochs in one schedule (no follow-up)
    max_examples: int | None = None  # the first N judged queries, then at most N examples (judged first)
    max_steps: int | None = None
    seed: int | None = None  # default: the recipe's mining seed
    output: str | Path | None = None  # default: operators.models.models_dir()
    name_prefix: str = "tessera"
    force: bool = False
    allow_eval_split: bool = False
    index_dir: str | Path | None = None
    progress: bool = True


@dataclass
class TrainedModel:
    kind: str
    name: str
    path: Path
    reused: bool
    seconds: float
    record: dict[str, Any]


@dataclass
class TrainReport:
    models: list[TrainedModel]
    mining: dict[str, Any]
    seconds: float


def resolve_kinds(models: list[str]) -> list[str]:
    kinds: list[str] = []
    for name in models:
        wanted = get_args(ModelKind) if name == "all" else (name,)  # all: what trains on the dataset
        for kind in wanted:
            if kind not in KINDS:
                raise TrainError(f"unknown model kind '{name}'; choose one of {', '.join(KINDS)} or all",
                                 field="model")
            if kind not in kinds:
                kinds.append(kind)
    if not kinds:
        raise TrainError(f"no model kind given; choose one of {', '.join(KINDS)} or all", field="model")
    return kinds


def training_order(kinds: list[str], training: TrainingSection) -> list[str]:
    """``kinds`` with each one after the kind its ``base`` names (``base: bi-encoder``: this run's bi-encoder)."""
    from graphlib import CycleError, TopologicalSorter

    graph = {kind: {base} & set(kinds) for kind in kinds if (base := getattr(training.params(kind), "base"))}
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError as err:
        raise TrainError(f"the models' bases form a cycle ({' -> '.join(err.args[1])}): one of them has to start "
                         "from a model that is not trained in this run", field=SECTION) from None


def _with_own_base(kind: str, params: BaseModel, output: Path, prefix: str) -> BaseModel:
    """Point a ``base`` that names another kind at this run's checkpoint of it (``<output>/<prefix>-<kind>``)."""
    base = getattr(params, "base")
    if base not in KINDS:
        return params
    folder = output / model_name(prefix, base)
    if not folder.is_dir():
        raise TrainError(f"{kind} starts from this run's {base} ({folder}), which is not trained yet: add "
                         f"--model {base}", field=f"{SECTION}.{kind.replace('-', '_')}.base")
    return params.model_copy(update={"base": str(folder)})


def _check_bases(kinds: list[str], training: TrainingSection, output: Path, prefix: str) -> None:
    """Fail before mining (minutes on a new dataset) when a base model is absent (a kind it names: trained before)."""
    from operators.models import resolve_model_path
    from operators.models.references import ModelNotFoundError

    for kind in kinds:
        base = getattr(training.params(kind), "base")
        if base in KINDS:
            if base not in kinds:
                _with_own_base(kind, training.params(kind), output, prefix)  # raises when it is not there
            continue
        try:
            resolve_model_path(base)
        except ModelNotFoundError as err:
            why = f"'{base}' is not trained yet: make it with: {made}" if (made := train_command(base)) else err
            raise TrainError(f"{kind}'s base: {why}", field=f"{SECTION}.{kind.replace('-', '_')}.base") from None


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


def train(options: TrainOptions, log: Callable[[str], None] = print) -> TrainReport:
    """Mine, then train (or reuse) every requested kind; see the module docstring. ``progress=False``
    (``--quiet``) also hides the libraries' own bars and notes (``quiet_libraries``)."""
    with quiet_libraries(not options.progress):
        return _train(options, log)


def _train(options: TrainOptions, log: Callable[[str], None]) -> TrainReport:
    from flows.train.mining import check_split
    from operators.models import models_dir

    started = time.perf_counter()
    flow, training = load_recipe(options.spec)
    kinds = training_order(resolve_kinds(list(options.models)), training)
    split = options.split or training.split
    check_split(split, options.allow_eval_split)
    mining = training.mining if options.seed is None else training.mining.model_copy(update={"seed": options.seed})
    if options.max_examples is not None and options.max_examples <= 0:
        raise TrainError(f"bad --max-examples {options.max_examples}: give a positive number", field="max_examples")
    if options.max_steps is not None and options.max_steps <= 0:
        raise TrainError(f"bad --max-steps {options.max_steps}: give a positive number", field="max_steps")
    from flows.bench.flowdefs import NAME  # the rule of bench's flow names: a file's name, no folder ('a/b')

    if not NAME.match(options.name_prefix or ""):
        raise TrainError(f"bad --name-prefix {options.name_prefix!r}: letters, digits, '_', '.' and '-', starting "
                         "with a letter or digit (the models are named PREFIX-KIND)", field="name_prefix")
    if "colbert" in kinds:
        colbert_trainer()  # fail before mining when it is missing
    needs_data = [kind for kind in kinds if kind not in DATA_FREE_KINDS]
    check_data_options(needs_data, options)
    output = Path(options.output).expanduser() if options.output else models_dir()
    _check_bases(kinds, training, output, options.name_prefix)
    checkpoints.check_destination(output, [output / model_name(options.name_prefix, kind) for kind in kinds],
                                  force=options.force)
    mined = _mine(options, flow, training, split, mining, log) if needs_data else None
    examples = (mined.examples[:options.max_examples] if options.max_examples else mined.examples) if mined else []
    own = {kind: own_examples(kind, examples, training.synthetic.kinds) for kind in needs_data}
    if mined:
        check_judged(own, mined.stats, log)  # every kind, before the first one trains
        warn_too_few(own, log)
    results = []
    for kind in kinds:
        params = _with_own_base(kind, training.params(kind), output, options.name_prefix)
        folder = output / model_name(options.name_prefix, kind)
        if kind in DATA_FREE_KINDS:
            results.append(_distill_static(params, folder, options, log))
            continue
        if options.epochs is not None:
            params = _one_schedule(params, options.epochs)
        results.append(_train_one(kind, params, own[kind], mined.stats, folder, seed=mining.seed, options=options,
                                  log=log))
    return TrainReport(models=results, mining=mined.stats if mined else {}, seconds=time.perf_counter() - started)


def _mine(options: TrainOptions, flow: Any, training: TrainingSection, split: str, mining: MiningParams,
          log: Callable[[str], None]):
    from flows.train.mining import mine

    more = [(LabelledSet(dataset=str(d), split=split, allow_eval_split=options.allow_eval_split), "")
            for d in options.more_datasets]
    more += [(s, f"{SECTION}.datasets.{n}") for n, s in enumerate(training.datasets)]
    return mine(options.dataset, flow, split=split, params=mining, max_queries=options.max_examples,
                max_examples=options.max_examples,
                allow_eval_split=options.allow_eval_split, index_dir=options.index_dir,
                synthetic=training.synthetic if training.synthetic.wanted() else None, more=more, log=log,
                progress=options.progress)


def _distill_static(params: Any, folder: Path, options: TrainOptions, log: Callable[[str], None]) -> TrainedModel:
    from flows.train.static import distill_checkpoint

    reused, seconds, record = distill_checkpoint(params, folder, force=options.force, log=log,
                                                 progress=options.progress)
    return TrainedModel("static", folder.name, folder, reused, seconds, record)


def _one_schedule(params: BaseModel, epochs: int) -> BaseModel:
    """``params`` set to train ``epochs`` epochs in one schedule (``--epochs``): a follow-up (``then``) is dropped."""
    update: dict[str, Any] = {"epochs": epochs}
    if "then" in type(params).model_fields:
        update["then"] = None
    return params.model_copy(update=update)


def _train_one(kind: str, params: BaseModel, examples: list[dict[str, Any]], mining: dict[str, Any], folder: Path,
               *, seed: int, options: TrainOptions, log: Callable[[str], None]) -> TrainedModel:
    key_inputs = {"kind": kind, "params": params.model_dump(mode="json"), "seed": seed,
                  "max_steps": options.max_steps, "base": checkpoints.base_fingerprint(getattr(params, "base")),
                  "examples": checkpoints.examples_sha256(examples), "format": 2}
    key = checkpoints.config_key(key_inputs)
    state = EpochState(staging_folder(folder), key, key_inputs, kind, log) if kind in RESUMABLE else None
    previous = None if options.force else checkpoints.read_record(folder)
    if state is not None and (options.force or (previous or {}).get("config_key") == key):
        state.clear()  # --force starts over; a finished checkpoint of this key needs no state
    if previous is not None and previous.get("config_key") == key:
        log(f"{kind}: reusing {folder} (trained with the same config; --force retrains)")
        return TrainedModel(kind, folder.name, folder, True, 0.0, previous)
    why, aside = checkpoints.replacement_note(folder, previous, key_inputs)
    log(f"{kind}: training on {len(examples)} examples -> {folder}{why}")

    def save(tmp: Path) -> dict[str, Any]:
        return run_trainer(kind, params, examples, tmp, seed=seed, max_steps=options.max_steps,
                           progress=options.progress, resume=state)

    record = checkpoints.write_checkpoint(folder, save, {
        "kind": kind, "name": folder.name, "config_key": key, "key_inputs": key_inputs,
        "dataset": mining["dataset"], "split": mining["split"], "counts": counts(kind, params, examples, mining),
        "mining": mining, "hyperparameters": params.model_dump(mode="json"), "seed": seed,
        "max_steps": options.max_steps, "previous_kept_as": aside.name if aside else None}, keep_previous=aside)
    if state is not None:
        state.clear()
    log(f"{kind}: trained in {record['seconds']:.0f} s -> {folder}")
    return TrainedModel(kind, folder.name, folder, False, record["seconds"], record)
