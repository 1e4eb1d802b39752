"""Ctrl-C while ``tessera run`` or ``tessera chat`` waits for the embedded model's prompt evaluation.

It waited for the evaluation to end (one llama.cpp call: 6 s and more on 2 cores, over a minute for a long
prompt on a busy machine), as Python runs a signal handler only between bytecodes. Now the call runs on the
model's worker thread and llama.cpp's abort callback stops it: status 130 and one line (``run``: its cancel's
lines). Each test is a real process running the command, with the model loaded first (so the signal lands in
the prompt, not the loading), sent SIGINT as soon as the model's call begins; it reports the model's
``n_tokens``: 0 means the prompt's evaluation was aborted, not finished.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]
#: The command in a process of its own, SIGINT to itself when the embedded model's call begins.
DRIVER = """
import json, os, signal, sys, threading, time
from flows.commands import main
from operators.llm import complete
from operators.llm.embedded_model import load

complete("hi", model="local", max_tokens=1)
llama, _ = load("smollm2-135m-instruct")

def interrupt() -> None:
    while llama.tessera_stop is None:
        time.sleep(0.002)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
status = main(sys.argv[1:])
print(json.dumps({"status": status, "n_tokens": llama.n_tokens}), file=sys.stderr)
sys.exit(status)
"""
SPEC = """name: small_rag
steps:
  bm25:    {op: retrieve.corpus_bm25, params: {k: 3}}
  context: {op: generate.context, params: {max_context_length: 256}}
  answer:  {op: generate.answer, params: {model: local, max_tokens: 8}}
"""
#: A question of about 3,000 tokens: seconds of prompt evaluation.
QUESTION = "what is " + "the cat on the mat " * 250

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # the embedded model in processes of their own


def _interrupted(tmp_path: Path, *args: str, stdin: str | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    spec = tmp_path / "small_rag.yaml"
    spec.write_text(SPEC)
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "COLUMNS": "160"}
    env.pop("TESSERA_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", DRIVER, args[0], str(spec), "--no-cache", *args[1:]], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600, input=stdin)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return proc, report


def _said(proc: subprocess.CompletedProcess) -> list[str]:
    """What the command wrote to stderr: its lines after the step lines, the driver's report and litellm's."""
    lines = proc.stderr.strip().splitlines()[:-1]
    return [line for line in lines if line.strip() and not line.startswith("[") and "LiteLLM" not in line]


def test_ctrl_c_stops_a_run_inside_the_prompt_evaluation(tmp_path):
    proc, report = _interrupted(tmp_path, "run", "--queries", QUESTION)
    assert proc.returncode == report["status"] == 130, proc.stderr
    assert report["n_tokens"] == 0, proc.stderr  # aborted inside the prompt's evaluation
    assert _said(proc) == ["tessera: cancelling (Ctrl-C again to abort)",
                           "tessera: cancelled: step 'answer': interrupted (Ctrl-C)"], proc.stderr
    assert TRACEBACK not in proc.stderr and proc.stdout == ""


def test_ctrl_c_stops_a_chat_inside_the_prompt_evaluation(tmp_path):
    proc, report = _interrupted(tmp_path, "chat", stdin=QUESTION + "\n")
    assert proc.returncode == report["status"] == 130, proc.stderr
    assert report["n_tokens"] == 0, proc.stderr
    assert _said(proc) == ["tessera: interrupted"], proc.stderr
    assert "answer:" not in proc.stdout
