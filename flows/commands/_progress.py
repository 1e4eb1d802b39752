"""What a long command shows while it runs: a progress bar or step lines, and Ctrl-C handling."""

from __future__ import annotations

import datetime
import signal
import sys
import threading
import time

from flows.commands._signals import stop_reason
from flows.commands._support import console
from flows.progress import redraws, time_left


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
        # on a terminal, off the line its ^C echo is on; in a log the line after the last one (it left a blank line)
        start = "\n" if sys.stderr.isatty() else ""
        print(f"{start}tessera: cancelling ({how} again to abort)", file=sys.stderr, flush=True)

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
    """The executor's progress callback: on a terminal, a rich bar of the steps and one of the current step's input
    rows with the time left; otherwise one line per finished step, and every ``HEARTBEAT_S`` a line saying how far
    a long step is (10,000 queries through one step said nothing for minutes)."""

    HEARTBEAT_S = 30.0

    def __init__(self, *, enabled: bool, flow: str) -> None:
        self.enabled = enabled
        self.flow = flow
        self.live = enabled and redraws()
        self.progress = None
        self.task = None
        self.step_task: tuple[str, int] | None = None  # (step, its bar's task id)
        self.done = 0
        self.step: str | None = None
        self.step_started = self.last_line = time.monotonic()
        self._lock = threading.Lock()
        self._last_event = None  # the latest event of a running step, for the heartbeat between events
        self._stopped = threading.Event()

    def __enter__(self):
        if self.live:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=20),
                                     MofNCompleteColumn(), TextColumn("{task.fields[note]}"), TimeElapsedColumn(),
                                     TimeRemainingColumn(), console=console(stderr=True), transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.flow, total=None, note="steps  0 rows")
        elif self.enabled:  # a log: events come only between batches, and one batch of LLM calls takes minutes
            threading.Thread(target=self._beat, name="tessera-progress", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped.set()
        if self.progress is not None:
            self.progress.stop()

    def _beat(self) -> None:
        """Every ``HEARTBEAT_S`` without a line, a line for the running step, also in the middle of its batch."""
        while not self._stopped.wait(min(1.0, self.HEARTBEAT_S / 4)):
            with self._lock:
                event = self._last_event
                if event is not None and time.monotonic() - self.last_line >= self.HEARTBEAT_S:
                    self._running_line(event)

    def _running_line(self, event) -> None:
        self.last_line = time.monotonic()
        place = min(event.steps_done + 1, event.steps_total)  # the steps done and this one: its "done" line's number
        print(f"[{place}/{event.steps_total}] {event.step} ({event.op}) running: "
              f"{how_far(event, time.monotonic() - self.step_started)}", file=sys.stderr, flush=True)

    def __call__(self, event) -> None:
        if not self.enabled:
            return
        with self._lock:
            if event.step != self.step and event.step:
                self.step, self.step_started = event.step, time.monotonic()
            ended = event.steps_done > self.done  # the event of a step that has just finished
            if self.progress is not None:
                self._update_bars(event)
            elif event.steps_done > self.done and event.step:
                self.done, self.last_line = event.steps_done, time.monotonic()
                print(f"[{event.steps_done}/{event.steps_total}] {event.step} ({event.op}) done, "
                      f"{event.step_rows_done} rows", file=sys.stderr, flush=True)
            elif event.step and not event.finished and time.monotonic() - self.last_line >= self.HEARTBEAT_S:
                self._running_line(event)
            running = event.step and not event.finished and event.steps_done < event.steps_total
            self._last_event = event if running and event.step == self.step and not ended else None

    def _update_bars(self, event) -> None:
        where = f"{self.flow}: {event.step} ({event.op})" if event.step else self.flow
        self.progress.update(self.task, description=where, completed=event.steps_done, total=event.steps_total,
                             note=f"steps  {event.rows_done} rows")
        if event.step and event.step_rows_total and event.steps_done < event.steps_total:
            if self.step_task is not None and self.step_task[0] != event.step:  # a new step: its own bar and clock
                self.progress.remove_task(self.step_task[1])
                self.step_task = None
            if self.step_task is None:
                self.step_task = (event.step, self.progress.add_task(f"  {event.step}", total=event.step_rows_total,
                                                                     note="rows in"))
            self.progress.update(self.step_task[1], completed=event.step_rows_in, total=event.step_rows_total)
        elif self.step_task is not None:
            self.progress.remove_task(self.step_task[1])
            self.step_task = None


def how_far(event, seconds: float) -> str:
    """``5120/10000 rows in, about 0:00:31 left`` (the time left at the step's pace so far), or its rows out."""
    if not event.step_rows_total:
        return f"{event.step_rows_done} rows so far"
    text = f"{event.step_rows_in}/{event.step_rows_total} rows in"
    if event.step_rows_in:
        text += ", " + time_left(seconds, event.step_rows_in, event.step_rows_total - event.step_rows_in)
    else:  # its first batch is under way (the queries of an LLM step are often one batch)
        text += f", {datetime.timedelta(seconds=round(seconds))} so far"
    return text
