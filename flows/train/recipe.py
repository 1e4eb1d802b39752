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
and mines nothing. Reading a recipe, its section and ``train_command`` are ``flows.train.recipe_file``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, get_args

from pydantic import BaseModel

from flows.train import checkpoints
from flows.train.errors import TrainError
from flows.train.examples import check_judged, counts, own_examples, warn_too_few
from flows.train.quiet import quiet_libraries
from flows.train.mining import MiningParams
from flows.train.splits import LabelledSet
from flows.train.recipe_file import (DATA_FREE_KINDS, KINDS, RECIPES_DIR, SECTION,  # noqa: F401 (re-exported)
                                     ColbertParams, Kind, Makes, TrainingSection, dataset_option, load_recipe,
                                     model_name, recipe_names, recipe_path, train_command)
from flows.train.resume import RESUMABLE, EpochState, staging_folder
from flows.train.static import check_data_options
from flows.train.synthetic import ModelKind
from flows.train.trainers import colbert_trainer, run_trainer


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


def train(options: TrainOptions, log: Callable[[str], None] = print) -> TrainReport:
    """Mine, then train (or reuse) every requested kind; see the module docstring. ``progress=False``
    (``--quiet``) also hides the libraries' own bars and notes (``quiet_libraries``)."""
    with quiet_libraries(not options.progress):
        return _train(options, log)


def _train(options: TrainOptions, log: Callable[[str], None]) -> TrainReport:
    from flows.train.splits import check_split
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
