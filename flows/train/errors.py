"""The error of ``tessera train``: one line, naming the bad argument, file or field."""

from __future__ import annotations

from operators.errors import TesseraError


class TrainError(TesseraError):
    """Training cannot run: a missing qrels split, an evaluation split, an unknown model kind, a bad config."""
