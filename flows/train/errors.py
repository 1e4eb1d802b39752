"""The error of ``tessera train``: one line, naming the bad argument, file or field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from operators.errors import TesseraError


class TrainError(TesseraError):
    """Training cannot run: a missing qrels split, an evaluation split, an unknown model kind, a bad config."""


def read_recipe(path: Path) -> dict[str, Any]:
    """A recipe file's mapping. Its text's problems are ``--spec``'s, naming the file (and, for a key given twice,
    the key's place and lines): a file that is not UTF-8 text was ``internal error: UnicodeDecodeError``."""
    from flows.specfile import load_yaml, read_text
    from operators.errors import SpecError

    try:
        return load_yaml(read_text(path), origin=str(path))
    except SpecError as err:
        raise TrainError(err.message, field="spec") from None
