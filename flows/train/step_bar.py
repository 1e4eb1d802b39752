"""Training's progress: a tqdm bar on a terminal; off one (a file, ``ray job submit``'s log), a line now and then.

A bar redraws itself with carriage returns: in a log, a 1,000-step run is one physical line of hundreds of
redraws. Off a terminal each line says the step, the total, the running loss and the time left at the pace so far
(as a bar's ETA does), at most every ``LINE_SECONDS`` and at the end, as ``tessera ingest`` does off a terminal
(``flows/ingestion/progress.py``)."""

from __future__ import annotations

import sys
import time
from typing import Any

from flows.progress import redraws, time_left

#: Off a terminal, the seconds between two progress lines.
LINE_SECONDS = 30.0


class _StepLines:
    """What ``tqdm`` gives training (``update``, ``set_postfix``, ``n``, ``close``), written as lines."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n = total, desc, 0
        self._postfix = ""
        self._last = time.monotonic()
        self._shown = -1
        self._pace_from: tuple[float, int] | None = None  # (time, step) the pace is measured from

    def update(self, steps: int = 1) -> None:
        self.n += steps
        if self._pace_from is None or steps != 1:  # the first step (a model's warm-up) or a resumed run's skipped
            self._pace_from = (time.monotonic(), self.n)  # epochs (one jump, no time spent) say nothing of the pace
        if time.monotonic() - self._last >= LINE_SECONDS:
            self._line()

    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        self._postfix = "".join(f", {name} {value}" for name, value in values.items())

    def close(self) -> None:
        if self.n != self._shown:
            self._line()

    def _line(self) -> None:
        print(f"{self.desc}: step {self.n}/{self.total}{self._postfix}{self._left()}", file=sys.stderr, flush=True)
        self._last, self._shown = time.monotonic(), self.n

    def _left(self) -> str:
        """``, about 0:04:10 left`` at the pace since ``_pace_from``; nothing before two steps or at the end."""
        if self._pace_from is None or self.n <= self._pace_from[1] or self.n >= self.total:
            return ""
        since, from_step = self._pace_from
        return ", " + time_left(time.monotonic() - since, self.n - from_step, self.total - self.n)


def step_bar(total: int, desc: str, progress: bool):
    """A bar of ``total`` steps (``progress`` False: none shown)."""
    if progress and not redraws():
        return _StepLines(total, desc)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", disable=not progress, file=sys.stderr, dynamic_ncols=True,
                mininterval=0.5)
