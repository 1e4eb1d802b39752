"""Progress of a benchmark on stderr: a rich progress bar on a terminal, lines otherwise."""

from __future__ import annotations

import sys
import threading
import time

from flows.progress import redraws
from operators.env_numbers import env_columns

#: Off a terminal, a step still running prints how far it got at most this often (seconds).
HEARTBEAT_S = 30.0


class BenchReporter:
    """Overall flows done, the current flow's steps; ``log`` prints a line above the bar."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.live = enabled and redraws()
        self._progress = None
        self._overall = None
        self._flow = None
        self._lock = threading.Lock()
        self._last_step = 0
        self._last_line = time.monotonic()
        from rich.console import Console

        width = None if self.live else env_columns()
        self.console = Console(file=sys.stderr, width=width, highlight=False, soft_wrap=True, emoji=False)

    def __enter__(self) -> "BenchReporter":
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.fields[note]}"), TimeElapsedColumn(),
                                      console=self.console, transient=True)
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()

    def log(self, message: str, *, style: str | None = None) -> None:
        if not self.enabled:
            return
        from rich.markup import escape

        text = escape(message)
        self.console.print(f"[{style}]{text}[/]" if style else text)

    def warn(self, message: str) -> None:
        """``tessera: warning: ...``, the line every command's warning is (docs/cli.md, "For scripts"), also with
        ``--quiet``."""
        if self.enabled:
            self.log(f"tessera: warning: {message}", style="yellow")
        else:
            print(f"tessera: warning: {message}", file=sys.stderr)

    def start(self, total_flows: int) -> None:
        if self._progress is not None:
            self._overall = self._progress.add_task("flows", total=total_flows, note="")

    def flow_started(self, name: str, steps: int) -> None:
        self._last_step = 0
        self._last_line = time.monotonic()
        if self._progress is not None:
            self._flow = self._progress.add_task(name, total=steps, note="")
        else:
            self.log(f"{name}: running ({steps} steps)")

    def __call__(self, event) -> None:
        """The executor's progress callback."""
        if not self.enabled:
            return
        with self._lock:
            if self._progress is not None and self._flow is not None:
                self._progress.update(self._flow, completed=event.steps_done, total=event.steps_total,
                                      note=f"{event.step or ''} {event.rows_done} rows")
            elif event.step and event.steps_done > self._last_step:
                self._last_step = event.steps_done
                self._last_line = time.monotonic()
                self.log(f"  [{event.steps_done}/{event.steps_total}] {event.step} ({event.op}) "
                         f"{event.step_rows_done} rows")
            elif event.step and time.monotonic() - self._last_line >= HEARTBEAT_S:  # a long step (a reranker)
                self._last_line = time.monotonic()
                self.log(f"  [{event.steps_done}/{event.steps_total}] {event.step} ({event.op}) running, "
                         f"{event.step_rows_done} rows so far")

    def flow_finished(self, name: str, message: str) -> None:
        if self._progress is not None:
            if self._flow is not None:
                self._progress.remove_task(self._flow)
                self._flow = None
            self._progress.advance(self._overall)
        self.log(f"{name}: {message}")
