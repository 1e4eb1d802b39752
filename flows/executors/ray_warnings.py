"""A step's warnings on a Ray worker, said by the driver as the local executor says them.

Logged on a worker, a degraded query's warning (``Operator.degrade``) reached the terminal only as Ray's forwarded
worker output: ``(MapBatches(...) pid=...)`` prefixes, colour codes and "repeated 2x across cluster" notes in place
of the command's ``tessera: warning:`` lines. Around a batch, ``carried`` keeps the warnings of ``CARRIED_LOGGER``
on the batch's thread from the worker's own logging and hands them to the driver with the batch's statistics
(``BatchStats.warnings``, through the run's reporter); ``say`` logs them there on the same logger, so the command's
handler (``flows.commands._log_lines``) or a caller's own logging gets the local run's lines."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

#: The logger of ``Operator.degrade`` (and of its cap's summary line).
CARRIED_LOGGER = "operators.base"


class _Kept(logging.Filter):
    """Keeps, and stops, the records at WARNING and above logged on one thread; lets the rest through."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.records: list[tuple[str, int, str, str]] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or threading.get_ident() != self.thread:
            return True
        self.records.append((record.name, record.levelno, record.getMessage(), record.funcName))
        return False


def carried(run: Callable[[Any], tuple[Any, Any]], batch: Any) -> tuple[Any, Any]:
    """``run(batch)``, a ``StepRunner.run``: its ``(table, stats)``, the warnings it logged in ``stats.warnings``."""
    kept, logger = _Kept(), logging.getLogger(CARRIED_LOGGER)
    logger.addFilter(kept)
    try:
        out, stats = run(batch)
    finally:
        logger.removeFilter(kept)
    stats.warnings = kept.records
    return out, stats


def say(warnings: list[tuple[str, int, str, str]]) -> None:
    """On the driver: each carried warning, on the logger and at the level the worker logged it, from the function
    that logged it (``tessera chat`` leaves out ``Operator.degrade``'s by its name: ``record.funcName``)."""
    for name, level, message, function in warnings:
        logger = logging.getLogger(name)
        if logger.isEnabledFor(level):
            logger.handle(logger.makeRecord(name, level, __file__, 0, message, None, None, func=function))
