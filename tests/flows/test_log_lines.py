"""A command's own process prints Tessera's log records as its own lines: a warning ``tessera: warning: ...``, an
error ``tessera: error: ...``, a note ``tessera: ...`` that ``--quiet`` hides. The handler is fed records here;
tests/flows/test_ingest_documents.py sees a real warning line of the console script."""

from __future__ import annotations

import logging

from flows.commands import _log_lines


def record(level: int, message: str, *args, **extra) -> logging.LogRecord:
    return logging.makeLogRecord({"name": "operators.sources", "levelno": level, "levelname": "x", "msg": message,
                                  "args": args, **extra})


def test_warnings_errors_and_notes_are_one_line_each_and_quiet_hides_only_notes(capsys, monkeypatch):
    monkeypatch.setitem(_log_lines._notes, "shown", True)  # as a new process has it; put back after the test
    handler = _log_lines._CommandLines(logging.WARNING)
    handler.handle(record(logging.WARNING, "left out: %s, line %d", "a.csv", 3))
    handler.handle(record(logging.ERROR, "two\nlines"))
    handler.handle(record(logging.WARNING, "preparing the query encoder (once)", note=True))
    assert capsys.readouterr().err == ("tessera: warning: left out: a.csv, line 3\ntessera: error: two lines\n"
                                       "tessera: preparing the query encoder (once)\n")
    _log_lines.hide_notes()
    handler.handle(record(logging.WARNING, "a note", note=True))
    handler.handle(record(logging.WARNING, "still a warning"))
    assert capsys.readouterr().err == "tessera: warning: still a warning\n"
