"""SIGTERM (``timeout``, systemd, ``kill PID``) stops a ``tessera`` command the way Ctrl-C does, with status 143;
and ``kill -INT`` stops a command that a shell started in the background with SIGINT ignored.

Each test runs the real command in a process of its own whose driver sends the signal to itself at a chosen
moment (a wrapped call of the real code, so the moment is exact): after an ingestion's first commit, or when a
run writes its ``--out`` file. BM25 only: no model is loaded."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "sample" / "corpus.jsonl"
#: Runs ``main(argv)`` after wrapping ``MODULE.NAME`` so that its first call sends SIGNAL to this process
#: (before the call, or after it with WHEN=after).
DRIVER = """
import importlib, os, signal, sys
from flows.commands import main

module, owner, name, signum, when = sys.argv[1:6]
target = importlib.import_module(module)
holder = getattr(target, owner) if owner != "-" else target
real = getattr(holder, name)
fired = []

def wrapped(*args, **kwargs):
    if not fired and when == "before":
        fired.append(1)
        os.kill(os.getpid(), int(signum))
    result = real(*args, **kwargs)
    if not fired and when == "after":
        fired.append(1)
        os.kill(os.getpid(), int(signum))
    return result

setattr(holder, name, wrapped)
sys.exit(main(sys.argv[6:]))
"""


def _command(tmp_path: Path, target: tuple[str, str, str], signum: int, when: str, *argv: str,
             ignore_sigint: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TESSERA_RAW_STDERR": "1"}
    env.pop("TESSERA_DEBUG", None)
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    return subprocess.run([sys.executable, "-c", DRIVER, *target, str(int(signum)), when, *argv], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300, preexec_fn=ignore)


def _ingest_args(index: Path) -> list[str]:
    """An ingest of the sample corpus's first 120 documents (next to ``index``) in 4 shards of 30: the whole corpus,
    in 4 shards of 300, took longer to the same end."""
    corpus = index.parent / "corpus.jsonl"
    if not corpus.exists():
        corpus.write_text("".join(CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:120]),
                          encoding="utf-8")
    return ["ingest", "--source", str(corpus), "--index", str(index), "--shard-size", "30", "--executor", "local",
            "--no-dense", "--quiet"]


def _no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert TRACEBACK not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


@pytest.mark.process
def test_sigterm_stops_an_ingest_as_ctrl_c_does_keeping_its_committed_shards(tmp_path):
    index = tmp_path / "idx"
    proc = _command(tmp_path, ("operators.store", "Index", "commit"), signal.SIGTERM, "after",
                    *_ingest_args(index))
    assert proc.returncode == 143, proc.stderr
    said = proc.stderr.strip().splitlines()[-1]
    assert said == ("tessera: terminated (SIGTERM); what was committed stays: to resume, run the same command "
                    f"again: tessera {shlex.join(_ingest_args(index))}"), proc.stderr
    _no_traceback(proc)
    manifest = json.loads((index / "manifest.json").read_text())
    assert len(manifest["shards"]) == 1  # the first shard stays; the same command resumes


@pytest.mark.process
def test_ctrl_c_during_an_ingest_says_the_command_that_resumes_it_and_that_command_does(tmp_path, monkeypatch, capsys,
                                                                                 committed_docnos):
    """It said ``tessera: interrupted`` alone: whether the run could go on, and how, was left to guess. The line
    now gives the command as typed, and the folder it ran in when a path of it is relative; run there, it finishes
    the ingest with each document once."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:120]), encoding="utf-8")
    argv = ["ingest", "--source", "corpus.jsonl", "--index", "./idx", "--shard-size", "30", "--no-dense", "--quiet"]
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TESSERA_RAW_STDERR": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", DRIVER, "operators.store", "Index", "commit", str(int(signal.SIGINT)),
                           "after", *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr
    said = proc.stderr.strip().splitlines()[-1]
    prefix = "tessera: interrupted; what was committed stays: to resume, run the same command again: "
    assert said == f"{prefix}tessera {shlex.join(argv)} (in {tmp_path})", proc.stderr
    _no_traceback(proc)

    command, folder = said[len(prefix):].rsplit(" (in ", 1)
    monkeypatch.chdir(folder.rstrip(")"))
    monkeypatch.setenv("TESSERA_HOME", env["TESSERA_HOME"])
    from flows.commands import main

    assert main(shlex.split(command)[1:]) == 0  # run where it says (in-process: a second interpreter's start saved)
    assert "(1 already done)" in capsys.readouterr().out
    docnos = committed_docnos(tmp_path / "idx")
    assert len(docnos) == len(set(docnos))  # no passage twice
    ids = {json.loads(line)["_id"] for line in corpus.read_text(encoding="utf-8").splitlines()}
    assert {docno.rsplit("#", 1)[0] for docno in docnos} == ids  # and no document lost


@pytest.mark.process
def test_ray_job_stop_of_an_ingest_job_says_to_submit_the_job_again_not_to_run_it_in_rays_temporary_folder(tmp_path):
    """``ray job stop`` sends a job's entrypoint SIGTERM. The line said ``run the same command again: ... (in
    /tmp/ray/session_.../runtime_resources/working_dir_files/_ray_pkg_...)``, Ray's temporary copy of the working
    directory, which Ray deletes: the job is resumed by submitting it again, and its relative paths are read where
    they were. Run as Ray's job supervisor starts an entrypoint (its job-config variable, an uploaded working dir)."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "corpus.jsonl").write_text("".join(CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:120]),
                                      encoding="utf-8")
    argv = ["ingest", "--source", "corpus.jsonl", "--index", str(tmp_path / "idx"), "--shard-size", "30",
            "--executor", "local", "--no-dense", "--quiet"]
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TESSERA_RAW_STDERR": "1",
           "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"runtime_env": {"working_dir": "gcs://_ray_pkg_0123.zip"}}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("TESSERA_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", DRIVER, "operators.store", "Index", "commit",
                           str(int(signal.SIGTERM)), "after", *argv], cwd=job, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 143, proc.stderr
    said = proc.stderr.strip().splitlines()[-1]
    assert said == ("tessera: terminated (SIGTERM); what was committed stays: to resume, submit the same Ray job "
                    f"again: tessera {shlex.join(argv)}"), proc.stderr
    _no_traceback(proc)


@pytest.mark.process
def test_sigterm_cancels_a_run_through_its_token(tmp_path):
    from flows.commands import main

    index = tmp_path / "idx"
    assert main(_ingest_args(index)) == 0
    proc = _command(tmp_path, ("flows.commands._progress", "ProgressReporter", "__call__"), signal.SIGTERM,
                    "before", "run", "bm25", "--index", str(index), "-q", "honey bees", "--no-cache")
    assert proc.returncode == 143, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("tessera:")]
    assert said[0] == "tessera: cancelling (SIGTERM again to abort)", proc.stderr
    assert "" not in proc.stderr.splitlines(), proc.stderr  # a log got a blank line before it
    assert said[-1].startswith("tessera: cancelled: ") and "SIGTERM" in said[-1], proc.stderr
    assert proc.stdout == ""
    _no_traceback(proc)


@pytest.mark.process
def test_kill_int_stops_a_run_started_with_sigint_ignored_while_it_writes_its_output(tmp_path):
    from flows.commands import main

    index, out = tmp_path / "idx", tmp_path / "res.jsonl"
    assert main(_ingest_args(index)) == 0
    proc = _command(tmp_path, ("flows.results_file", "-", "write_counted"), signal.SIGINT, "before", "run", "bm25",
                    "--index", str(index), "-q", "honey bees", "--no-cache", "--quiet", "--out", str(out),
                    ignore_sigint=True)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "tessera: interrupted", proc.stderr
    assert not out.exists()
    _no_traceback(proc)


#: Sends SIGINT to this process as the command's modules load (the import of ``flows.commands.ingest``, which
#: building the parser makes), then runs the console script's function.
WHILE_LOADING = """
import importlib.abc, os, signal, sys

class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "flows.commands.ingest":
            os.kill(os.getpid(), signal.SIGINT)
        return None

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a test worker's children ignore it)
sys.meta_path.insert(0, Interrupt())
from flows.cli import main
sys.argv = ["tessera", *sys.argv[1:]]
sys.exit(main())
"""


@pytest.mark.process
def test_ctrl_c_while_the_command_loads_is_one_line_and_status_130(tmp_path):
    """Before the command's own handlers were in place, Ctrl-C printed 20-56 lines of the traceback of the import it
    stopped (in numpy, pydantic or the parser's build)."""
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, "-c", WHILE_LOADING, "index", "info", str(tmp_path / "none")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr) == (130, "tessera: interrupted\n"), proc.stderr
