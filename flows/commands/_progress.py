"""What a long command shows while it runs: a progress bar or step lines, and Ctrl-C handling."""

from __future__ import annotations

import signal
import sys
import threading

from flows.commands._signals import stop_reason
from flows.commands._support import console


class cancel_on_interrupt:
    """First Ctrl-C cancels the run through its token; a second one aborts (KeyboardInterrupt). SIGTERM comes
    here too (``_signals``), named as such."""

    def __init__(self, token) -> None:
        self.token = token
        self.previous = None

    def _handler(self, signum, frame) -> None:
        if self.token.cancelled:
            raise KeyboardInterrupt
        how = stop_reason(signum)
        self.token.cancel(f"interrupted ({how})")
        print(f"\ntessera: cancelling ({how} again to abort)", file=sys.stderr, flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def stderr_bar(counts: str):
    """The commands' progress bar on stderr (a rich ``Progress``, gone once it stops): the description, the bar,
    done of total, ``counts`` (a column over the task's fields, what has been counted so far) and the time."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(counts),
                    TimeElapsedColumn(), console=console(stderr=True), transient=True)


class ProgressReporter:
    """The executor's progress callback: a rich progress bar on a terminal, one line per step otherwise."""

    def __init__(self, *, enabled: bool, flow: str) -> None:
        self.enabled = enabled
        self.flow = flow
        self.live = enabled and sys.stderr.isatty()
        self.progress = None
        self.task = None
        self.done = 0
        self._lock = threading.Lock()

    def __enter__(self):
        if self.live:
            self.progress = stderr_bar("steps  {task.fields[rows]} rows")
            self.progress.start()
            self.task = self.progress.add_task(self.flow, total=None, rows=0)
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, event) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self.progress is not None:
                where = f"{self.flow}: {event.step} ({event.op})" if event.step else self.flow
                self.progress.update(self.task, description=where, completed=event.steps_done,
                                     total=event.steps_total, rows=event.rows_done)
            elif event.steps_done > self.done and event.step:
                self.done = event.steps_done
                print(f"[{event.steps_done}/{event.steps_total}] {event.step} ({event.op}) done, "
                      f"{event.step_rows_done} rows", file=sys.stderr, flush=True)
