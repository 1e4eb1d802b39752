"""Training's progress: a tqdm bar on a terminal; off one (a file, ``ray job submit``'s log), a line now and then.

A bar redraws itself with carriage returns: in a log, a 1,000-step run is one physical line of hundreds of
redraws. Off a terminal each line says the step, the total and the running loss, at most every ``LINE_SECONDS``
and at the end, as ``tessera ingest`` does off a terminal (``flows/ingestion/progress.py``)."""

from __future__ import annotations

import sys
import time
from typing import Any

#: Off a terminal, the seconds between two progress lines.
LINE_SECONDS = 30.0


class _StepLines:
    """What ``tqdm`` gives training (``update``, ``set_postfix``, ``n``, ``close``), written as lines."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n = total, desc, 0
        self._postfix = ""
        self._last = time.monotonic()
        self._shown = -1

    def update(self, steps: int = 1) -> None:
        self.n += steps
        if time.monotonic() - self._last >= LINE_SECONDS:
            self._line()

    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        self._postfix = "".join(f", {name} {value}" for name, value in values.items())

    def close(self) -> None:
        if self.n != self._shown:
            self._line()

    def _line(self) -> None:
        print(f"{self.desc}: step {self.n}/{self.total}{self._postfix}", file=sys.stderr, flush=True)
        self._last, self._shown = time.monotonic(), self.n


def step_bar(total: int, desc: str, progress: bool):
    """A bar of ``total`` steps (``progress`` False: none shown)."""
    if progress and not sys.stderr.isatty():
        return _StepLines(total, desc)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", disable=not progress, file=sys.stderr, dynamic_ncols=True,
                mininterval=0.5)
