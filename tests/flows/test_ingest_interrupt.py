"""Ctrl-C during ``tessera ingest``: a real process, interrupted as a terminal does it (SIGINT to its group).

It used to finish embedding the shard under way first (15 s to minutes), then throw it away; a second Ctrl-C in
that wait aborted in C++ (status 134); on Ray it waited up to 30 s for a shard and started a second Ray cluster
while it exited. Now: status 130, one line, within one encoder call; and the same command finishes the job, with
the same documents as a run never interrupted. Timing is only bounded loosely (``PROMPT_S``): the machine is
shared. Off a terminal, the command prints a line per committed shard, which is when the tests interrupt it.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flows.ingestion import ingest
from flows.ingestion.progress import ProgressTracker
from tests.flows.ctrl_c import assert_interrupted, interrupt_when

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"
TESSERA = Path(sys.executable).parent / "tessera"


@pytest.fixture
def corpus400(tmp_path) -> Path:
    path = tmp_path / "corpus400.jsonl"
    path.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:400]), encoding="utf-8")
    return path


def _join_ingest_threads() -> None:
    """Wait for the embedding thread an interrupted in-process run left (it ends after its encoder call)."""
    for thread in threading.enumerate():
        if thread.name.startswith("tessera-ingest"):
            thread.join(300)


@pytest.mark.slow
def test_an_interrupt_stops_the_embedding_within_a_part_and_keeps_what_was_committed(tmp_path, corpus400,
                                                                                     committed_docnos):
    """Ctrl-C (SIGINT, in this process) while the second shard is embedded: the run stops after the encoder call
    under way, at most one more before it sees the stop. The shard before stays, the same call finishes the job.
    Before, the embedding went on to the end of the shard (170 more documents here) and was thrown away."""
    spec = {"name": "ingest", "steps": {"read": {"op": "sources.jsonl", "params": {"path": "unused.jsonl"}},
                                        "embed": {"op": "embed.sentence_transformer", "batch_size": 32}}}
    events, sent = [], []

    def on_progress(event) -> None:
        events.append(event)
        if not sent and event.stage == "ingest" and event.shards == 1 and event.docs > 200:
            sent.append(event.docs)  # the second shard's embedding has begun
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever runs pytest
    try:
        with pytest.raises(KeyboardInterrupt):
            ingest(corpus400, tmp_path / "idx", shard_size=200, executor="local", spec=spec, progress=False,
                   on_progress=on_progress)
            time.sleep(60)  # the signal lands in the main thread at once; this only keeps it inside the raises
    finally:
        signal.signal(signal.SIGINT, previous)
    _join_ingest_threads()
    after = max(e.docs for e in events if e.stage == "ingest") - sent[0]
    assert after <= 2 * 32, after  # the call under way and one begun before the stop was set
    assert len(committed_docnos(tmp_path / "idx")) == 200  # the first shard, and only it

    report = ingest(corpus400, tmp_path / "idx", shard_size=200, executor="local", spec=spec, progress=False)
    assert (report.shards_skipped, report.shards_written, report.docs) == (1, 1, 200)
    ids = sorted(json.loads(line)["_id"] for line in corpus400.read_text(encoding="utf-8").splitlines())
    assert committed_docnos(tmp_path / "idx") == ids  # unchunked: docno = id, each once


def test_the_bar_counts_a_committed_shards_documents_before_it_shows_the_shard(monkeypatch):
    """It showed ``shards=1/2`` beside the documents of the shard before; off a terminal it prints lines."""
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("TERM", "xterm")  # a terminal that redraws (a dumb one gets lines: flows.progress.redraws)
    with ProgressTracker("ingest", docs_total=10, shard_docs={"a": 4, "b": 6}) as tracker:
        tracker.committed("a", 4, 0)
    frames = [frame for frame in terminal.getvalue().split("\r") if "shards=1/2" in frame]
    assert frames and all("4.00/10.0" in frame for frame in frames), frames

    lines = io.StringIO()
    monkeypatch.setattr(sys, "stderr", lines)
    with ProgressTracker("ingest", docs_total=10, shard_docs={"a": 4, "b": 6}) as tracker:
        tracker.embedded("b", 3)
        tracker.committed("a", 4, 1)
        tracker.committed("b", 6, 0)
    written = lines.getvalue().splitlines()
    assert written[0] == "ingest: 10 docs in 2 shard(s)" and len(written) == 3, written
    assert re.fullmatch(r"ingest: shard 1/2 committed, 7/10 docs, 1 failed, [\d.]+ docs/s, about \d+:\d\d:\d\d left",
                        written[1]), written  # the pace and the time left: a log's reader need not do the sums
    assert re.fullmatch(r"ingest: shard 2/2 committed, 10/10 docs, 1 failed, [\d.]+ docs/s", written[2]), written
    assert all(" 0 docs/s" not in line for line in written)


def test_a_pace_below_ten_documents_a_second_is_said_to_two_digits(monkeypatch):
    """A first small ingest (4 documents in 11 s, the model's load among them) said "0 docs/s"."""
    lines = io.StringIO()
    monkeypatch.setattr(sys, "stderr", lines)
    with ProgressTracker("ingest", docs_total=4, shard_docs={"a": 4}) as tracker:
        tracker._started -= 11  # the stage began 11 s ago
        tracker.committed("a", 4, 0)
    assert lines.getvalue().splitlines()[-1] == "ingest: shard 1/1 committed, 4/4 docs, 0 failed, 0.36 docs/s"


def _interrupt_after_first_commit(proc: subprocess.Popen, *, twice: bool = False) -> tuple[list[str], float]:
    """Ctrl-C once a shard is committed."""
    return interrupt_when(proc, lambda line: " committed, " in line, twice=twice)


def _ingest_cli(corpus: Path, index: Path, executor: str) -> subprocess.Popen:
    """``tessera ingest`` in a session of its own, SIGINT at its default (a background job may ignore it)."""
    env = {**os.environ, "TESSERA_HOME": str(index.parent / "home"), "COLUMNS": "120"}
    return subprocess.Popen([str(TESSERA), "ingest", "--source", str(corpus), "--index", str(index),
                             "--shard-size", "100", "--executor", executor], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.slow
def test_ctrl_c_stops_a_local_ingest_at_once_and_the_same_command_finishes_it(tmp_path, corpus400,
                                                                               committed_docnos):
    reference = ingest(corpus400, tmp_path / "reference", shard_size=100, executor="local", spec="ingest",
                       progress=False)  # the command's defaults
    assert reference.docs == 400
    index = tmp_path / "idx"

    proc = _ingest_cli(corpus400, index, "local")
    lines, seconds = _interrupt_after_first_commit(proc)
    assert_interrupted(proc, lines, seconds, resume=True)
    # off a terminal, lines and no bar redraws (the documents count those of the next shard embedded so far)
    assert lines[:2] == ["staging: 400 docs", "ingest: 400 docs in 4 shard(s)"], lines
    assert lines[2].startswith("ingest: shard 1/4 committed, ") and " docs, 0 failed, " in lines[2] \
        and lines[2].endswith(" left"), lines
    first = committed_docnos(index)
    assert 0 < len(first) < len(committed_docnos(tmp_path / "reference"))

    proc = _ingest_cli(corpus400, index, "local")  # resumed, and interrupted twice: no abort (it was 134)
    lines, seconds = _interrupt_after_first_commit(proc, twice=True)
    assert_interrupted(proc, lines, seconds, resume=True)

    proc = _ingest_cli(corpus400, index, "local")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    assert committed_docnos(index) == committed_docnos(tmp_path / "reference")


@pytest.mark.ray
@pytest.mark.slow
def test_ctrl_c_stops_an_ingest_on_ray_with_one_line_and_one_ray_cluster(tmp_path, corpus400, committed_docnos):
    index = tmp_path / "idx"
    started = datetime.datetime.now() - datetime.timedelta(seconds=1)  # Ray names a session in local time
    proc = _ingest_cli(corpus400, index, "ray")
    lines, seconds = _interrupt_after_first_commit(proc)
    assert_interrupted(proc, lines, seconds, resume=True)
    # Ray names a session folder after the driver's pid: a second cluster started while exiting made another.
    # Its folder is under RAY_TMPDIR, else TMPDIR (Linux), else /tmp, as Ray picks it for the driver
    linux_tmp = os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None
    ray_tmp = Path(os.environ.get("RAY_TMPDIR") or linux_tmp or "/tmp") / "ray"
    sessions = [s for s in ray_tmp.glob(f"session_*_{proc.pid}")  # (an older one of a process of the same pid: no)
                if datetime.datetime.strptime(s.name[len("session_"):-len(f"_{proc.pid}")], "%Y-%m-%d_%H-%M-%S_%f")
                >= started]
    assert len(sessions) == 1, sessions

    proc = _ingest_cli(corpus400, index, "local")  # what Ray committed stays, what it left half-done is redone
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    docnos = committed_docnos(index)
    assert len(docnos) == len(set(docnos))
    ids = {json.loads(line)["_id"] for line in corpus400.read_text(encoding="utf-8").splitlines()}
    assert {docno.split("#")[0] for docno in docnos} == ids
