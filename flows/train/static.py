"""Distil a static embedding model (model2vec) from a sentence-transformers model, offline.

A static model is one vector per token of the base model's vocabulary: the base encodes each
token alone once, the vectors are reduced with PCA and weighted by token rank (SIF), and a text's
embedding is the mean of its tokens' vectors. Encoding is a table lookup, so it embeds tens of
times faster than MiniLM on a CPU, at a cost in ranking quality that docs/results.md reports. No
data and no download are needed: distillation runs over the base's own vocabulary.

The saved folder is a sentence-transformers model (``StaticEmbedding`` then ``Normalize``), so
``embed.sentence_transformer``, ``retrieve.dense`` and ingestion (``index_settings.encoder``)
load it by name like any other encoder: ``tessera train --model static`` makes
``$TESSERA_HOME/models/tessera-static``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import BaseModel, ConfigDict, Field

from flows.progress import redraws
from flows.train import checkpoints
from flows.train.errors import TrainError


class StaticParams(BaseModel):
    """How the static model is distilled (``model2vec.distill.distill``)."""

    model_config = ConfigDict(extra="forbid")

    base: str = Field("all-MiniLM-L6-v2", description="The sentence-transformers model distilled: a reference "
                      "operators.models resolves (its tokenizer is the static model's).")
    pca_dims: int | None = Field(256, gt=0, description="Dimensions kept by PCA (null: the base's own).")
    sif_coefficient: float | None = Field(1e-4, gt=0, lt=1, description="SIF weighting of frequent tokens "
                                          "(null: none).")


def distill_checkpoint(params: StaticParams, folder: Path, *, force: bool, log: Callable[[str], None],
                       progress: bool = True) -> tuple[bool, float, dict[str, Any]]:
    """Distil into ``folder`` unless it holds a model distilled with the same inputs; (reused, seconds, record).
    ``progress``: model2vec's bar over the vocabulary."""
    version = _model2vec_version()
    key_inputs = {"kind": "static", "params": params.model_dump(mode="json"),
                  "base": checkpoints.base_fingerprint(params.base), "model2vec": version, "format": 1}
    key = checkpoints.config_key(key_inputs)
    previous = None if force else checkpoints.read_record(folder)
    if previous is not None and previous.get("config_key") == key:
        log(f"static: reusing {folder} (distilled with the same config; --force distils again)")
        return True, 0.0, previous
    why, aside = checkpoints.replacement_note(folder, previous, key_inputs)
    log(f"static: distilling {params.base} over its vocabulary -> {folder}{why}")
    record = checkpoints.write_checkpoint(folder, lambda tmp: _distill(params, tmp, progress), {
        "kind": "static", "name": folder.name, "config_key": key, "key_inputs": key_inputs,
        "hyperparameters": params.model_dump(mode="json")}, keep_previous=aside)
    log(f"static: distilled in {record['seconds']:.0f} s -> {folder}")
    return False, record["seconds"], record


def _model2vec_version() -> str:
    try:
        import model2vec
        import skeletoken  # noqa: F401  (model2vec.distill's tokenizer surgery)
    except ImportError as err:
        raise TrainError(f"distilling a static model needs model2vec and skeletoken ({err.name} is missing): "
                         "pip install tessera[static]", field="model") from None
    return model2vec.__version__


def _distill(params: StaticParams, tmp: Path, progress: bool) -> dict[str, Any]:
    import os

    from model2vec.distill import distill, inference

    from operators.models import resolve_model_path

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # model2vec asks the hub for a model card only for hub ids
    started = time.perf_counter()
    base = resolve_model_path(params.base)
    with _bar(inference, progress):
        model = distill(model_name=str(base), pca_dims=params.pca_dims, sif_coefficient=params.sif_coefficient,
                        device="cpu")
    model.save_pretrained(str(tmp))
    config_file = tmp / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["tokenizer_name"] = params.base  # not this machine's site-packages path
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return {"seconds": round(time.perf_counter() - started, 3), "vocabulary": int(model.embedding.shape[0]),
            "dimension": int(model.embedding.shape[1])}


@contextlib.contextmanager
def _bar(module: Any, progress: bool) -> Iterator[None]:
    """``module``'s tqdm bars (model2vec's "Encoding tokens", which has no switch of its own) off unless
    ``progress`` on a terminal (in a log, a bar is a line of redraws), by giving the module a tqdm that is disabled
    while it runs."""
    shown = getattr(module, "tqdm", None)
    if (progress and redraws()) or shown is None:
        yield
        return
    module.tqdm = functools.partial(shown, disable=True)
    try:
        yield
    finally:
        module.tqdm = shown


def check_data_options(needs_data: list[str], options: Any) -> None:
    """The kinds trained on data need ``--dataset``; a run of only ``static`` refuses the options of training on data,
    which it has none of: ``--model static --epochs 3 --dataset D`` distilled (or reused) the one model and said
    nothing of them. ``options``: a ``flows.train.recipe.TrainOptions``."""
    if needs_data:
        if options.dataset is None:
            raise TrainError(f"training {', '.join(needs_data)} needs --dataset: a BEIR folder with a training split",
                             field="dataset")
        return
    given = [option for option, value in (("--dataset", options.dataset), ("--split", options.split),
                                          ("--epochs", options.epochs), ("--max-examples", options.max_examples),
                                          ("--max-steps", options.max_steps)) if value is not None]
    if given:
        named = ", ".join(given[:-1]) + " or " + given[-1] if len(given) > 1 else given[0]
        raise TrainError(f"--model static is distilled from its base alone and takes no {named}: leave "
                         f"{'them' if len(given) > 1 else 'it'} out, or add a --model that trains on a dataset",
                         field=given[0][2:].replace("-", "_"))
