"""A command's own process prints Tessera's log records as its own lines: a warning ``tessera: warning: ...``, an
error ``tessera: error: ...``, a note ``tessera: ...`` that ``--quiet`` hides. The handler is fed records here;
tests/flows/test_ingest_documents.py sees a real warning line of the console script, and a step's cost before it
is spent is a note of it here."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.process
def test_the_console_script_prints_a_steps_cost_as_a_note_not_a_warning(tmp_path, fault_models):
    """rerank.llm_group's "N model calls for 1 query, starting" said ``tessera: warning:`` on every normal run."""
    import os

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "title": "Bee", "text": f"Honey bees make honey {i}."})
                              + "\n" for i in range(3)))
    spec = tmp_path / "judged.yaml"
    spec.write_text(json.dumps({"name": "judged", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus), "k": 3}},
        "groups": {"op": "rerank.llm_group", "params": {"model": "fault-ok", "n": 3}}}}))
    fault_models.reply = "1"
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TESSERA_HOME": str(tmp_path / "home"), "COLUMNS": "200",
           "TESSERA_RAW_STDERR": "1", **{k: os.environ[k] for k in ("TESSERA_MODELS", "TESSERA_FAULT_KEY")}}
    tessera = str(Path(sys.executable).with_name("tessera"))
    done = subprocess.run([tessera, "run", str(spec), "--queries", "honey bees", "--no-cache", "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "tessera: rerank.llm_group [groups]: 3 model calls for 1 query, starting\n" in done.stderr, done.stderr
    assert "warning:" not in done.stderr and fault_models.attempts["ok"] == 3


def test_a_ray_batchs_degraded_warnings_are_said_by_the_driver_as_the_local_run_says_them(capsys, monkeypatch):
    """With ``--executor ray`` a degraded query's warning came out as Ray's forwarded worker output (``(pid=...)``
    prefixes, colours, "repeated 2x across cluster") in place of these lines. A worker's batch now keeps them from its
    own log (``ray_warnings.carried``) and the driver says them (``say``): the local run's lines, its cap included."""
    import socket

    import pyarrow as pa

    from flows.executors.ray_warnings import carried, say
    from flows.runner import StepRunner
    from operators.registry import create
    from operators.testing import sample_results

    monkeypatch.setattr(logging.getLogger("operators"), "handlers", [_log_lines._CommandLines(logging.WARNING)])
    with socket.socket() as probe:  # a localhost port nobody listens on: every request is refused at once
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1/rerank"
    op = create("rerank.api", {"url": url, "max_retries": 0, "timeout": 2}, step_id="remote")
    table = sample_results(1, 7)  # a query a row: more degraded queries than a batch's warnings, five and a summary
    table = table.set_column(0, "qid", pa.array([f"q{i}" for i in range(7)]))
    local = StepRunner(op, None).run(table)[1]
    said_locally = capsys.readouterr().err
    assert said_locally.count("tessera: warning: rerank.api [remote]: query ") == 5
    assert "more queries of this batch keep its first-stage ranking" in said_locally.splitlines()[-1]
    out, stats = carried(StepRunner(op, None).run, table)
    assert capsys.readouterr().err == ""  # the worker's log: nothing (Ray forwarded it to the terminal)
    assert stats.metadata == local.metadata and out.num_rows == table.num_rows
    assert "degrade" in {function for *_, function in stats.warnings}  # what tessera chat leaves out, by its name
    say(stats.warnings)
    assert capsys.readouterr().err == said_locally
