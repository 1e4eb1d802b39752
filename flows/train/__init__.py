"""Reranker and retriever training on a dataset's training split (``tessera train``).

::

    tessera train --dataset DIR [--dataset DIR ...] [--model cross-encoder|bi-encoder|colbert|all] [--spec train]
    python -m flows.train ...   # the same, as a job entry point (ray job submit)

Modules, one concern each: ``mining`` (hard negatives from Tessera's own retrieval
over the training queries; ``corpus`` checks and reads the corpus file), ``examples``
(what each kind trains on, and its counts), ``cross_encoder`` / ``bi_encoder`` (the trainers, on
``_loop``'s step loop; ``colbert`` is ColBERT's; ``trainers`` picks one per kind), ``resume`` (the
state saved at epoch ends, to go on after an interruption), ``checkpoints`` (where models go,
``training.json``, reuse, atomic writes, the listing of ``tessera train --list``), ``recipe`` (the
recipe spec and ``train(options)``).
"""

from typing import Any

__all__ = ["TrainError", "TrainOptions", "TrainReport", "public_train_command", "train", "train_command"]


def train_command(name: str, placeholder: bool = False) -> str | None:
    """The ``tessera train`` command that makes the model ``name`` (``recipe.train_command``), or None;
    a function here so that passing it along imports no recipe until a model is missing."""
    from flows.train.recipe import train_command as command

    return command(name, placeholder)


def public_train_command(name: str) -> str | None:
    """``train_command`` with its dataset by a stand-in (``<path-to-scifact>``), for the service's clients."""
    return train_command(name, placeholder=True)


def __getattr__(name: str) -> Any:  # lazy: `tessera --help` does not import torch
    if name == "TrainError":
        from flows.train.errors import TrainError

        return TrainError
    if name in __all__:
        from flows.train import recipe

        return getattr(recipe, name)
    raise AttributeError(name)
