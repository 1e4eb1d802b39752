"""Tessera's own log warnings on the terminal as the command's own lines: ``tessera: warning: ...``.

Without a handler, Python's last resort printed them bare, so an engine warning (a source's line left out, a fan-in
read as a union) looked like a progress line beside the ``tessera: warning:`` lines the commands print, and
``grep warning`` missed it. Only a command of its own installs this (the console script, ``python -m flows.run``);
a Python caller keeps its own logging. A record logged with ``extra={"note": True}`` is a note, not a warning: a
wait said once (``tessera: preparing the torch-free query encoder ...``)."""

from __future__ import annotations

import logging
import sys

#: The loggers of Tessera's packages: their records, and those of their children, get a line each.
TESSERA_LOGGERS = ("tessera", "operators", "flows", "serve")
#: Whether notes are shown: ``--quiet`` hides them, and never a warning.
_notes = {"shown": True}


class _CommandLines(logging.Handler):
    """One line on (the current) stderr per record: tests and redirections swap ``sys.stderr`` after it is made."""

    def emit(self, record: logging.LogRecord) -> None:
        from operators.errors import one_line

        note = getattr(record, "note", False)
        if note and not _notes["shown"]:
            return
        try:
            kind = "" if note else "error: " if record.levelno >= logging.ERROR else "warning: "
            sys.stderr.write(f"tessera: {kind}{one_line(record.getMessage())}\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging's own rule: a record that cannot be written is not an error
            self.handleError(record)


def warnings_as_command_lines() -> None:
    """Give Tessera's loggers the handler (once; WARNING and above, as the last resort showed)."""
    for name in TESSERA_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(handler, _CommandLines) for handler in logger.handlers):
            logger.addHandler(_CommandLines(logging.WARNING))


def hide_notes() -> None:
    """``--quiet``: no notes, warnings still."""
    _notes["shown"] = False
