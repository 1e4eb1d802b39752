"""Ctrl-C while a language model loads (``operators.llm.loading``).

The first model call of a process imports litellm (seconds). ``tessera run`` cancels on Ctrl-C, and nothing checked
the cancel during the import: the command ended only once it was over (9.5 s here, then the interpreter's exit).
Now the import runs on a daemon thread and the command ends at once, with its usual lines and status 130, the
import left unfinished. The embedded model's weights load in one C call during which llama-cpp-python points
stdout and stderr at /dev/null; a handler that ran then printed nothing, so a signal's handler runs after it.

Each test is a real process: ``tessera`` (its ``main``, as the console script calls it) sent SIGINT by this test
as soon as it starts importing litellm, or the model loaded while a thread of its own sends SIGINT inside
llama-cpp-python's /dev/null window.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from operators.llm.loading import signals_held

REPO = Path(__file__).resolve().parents[3]
#: ``tessera ARGS`` that says ``loading`` on stderr once litellm's import has begun, and at its end whether
#: litellm's Router (what the first model call builds) was there when the command returned.
COMMAND = """
import json, sys, threading, time
from flows.commands import main
from operators.models.repository import models

def loading() -> None:
    while "litellm" not in sys.modules:
        time.sleep(0.001)
    print("loading", file=sys.stderr, flush=True)

threading.Thread(target=loading, daemon=True).start()
status = main(sys.argv[1:])
built = any(name == "litellm_router" for name, _ in models.keys())
print(json.dumps({"status": status, "router_built": built}), file=sys.stderr, flush=True)
sys.exit(status)
"""
#: The embedded model loaded with a SIGINT handler that prints, the signal sent while stderr is /dev/null.
LOAD = """
import os, signal, sys, threading, time
from operators.llm.embedded_model import load

signal.signal(signal.SIGINT, lambda signum, frame: print("handled", file=sys.stderr, flush=True))

def interrupt() -> None:
    while os.readlink("/proc/self/fd/2") != os.devnull:
        time.sleep(0.0002)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
load("smollm2-135m-instruct")
print("loaded", file=sys.stderr, flush=True)
"""


def interrupted_while_loading(tmp_path: Path, *args: str, stdin: str | None = None) -> tuple[list[str], dict]:
    """``tessera ARGS`` sent SIGINT once it imports litellm: its stderr lines (litellm's left out), and its report
    (``router_built``: whether it waited for litellm's import to end, 15 s on a busy 2-core machine)."""
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "COLUMNS": "160"}
    env.pop("TESSERA_DEBUG", None)
    proc = subprocess.Popen([sys.executable, "-c", COMMAND, *args], cwd=REPO, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stuck = threading.Timer(300, proc.kill)  # a process that never says `loading` ends the read below
    stuck.start()
    try:
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.flush()
        lines = []
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if line.strip() == "loading":
                break
        assert lines[-1:] == ["loading"], lines
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=120)
    finally:
        stuck.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines += rest.splitlines()
    report = json.loads(lines[-1])
    said = [line for line in lines[:-1] if line.strip() and line != "loading" and "LiteLLM" not in line]
    return said, report


@pytest.mark.process
def test_ctrl_c_while_litellm_loads_ends_a_run_at_once(tmp_path):
    said, report = interrupted_while_loading(tmp_path, "run", "answer_only", "--no-cache", "--quiet",
                                                      "--queries", "What do bees make?")
    assert report == {"status": 130, "router_built": False}  # it did not wait for the load
    assert said == ["tessera: cancelling (Ctrl-C again to abort)",
                    "tessera: cancelled: step 'answer': interrupted (Ctrl-C)"]


@pytest.mark.process
def test_ctrl_c_while_litellm_loads_ends_a_chat_at_once(tmp_path):
    said, report = interrupted_while_loading(tmp_path, "chat", "answer_only", "--no-cache",
                                                      stdin="What do bees make?\n")
    assert report == {"status": 130, "router_built": False}
    assert said == ["tessera: interrupted"]


@pytest.mark.skipif(not Path("/proc/self/fd/2").exists(), reason="needs /proc to see stderr pointed at /dev/null")
@pytest.mark.process
def test_a_signal_while_the_weights_load_is_handled_after_the_load_where_its_output_is_seen(tmp_path):
    proc = subprocess.run([sys.executable, "-c", LOAD], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TESSERA_HOME": str(tmp_path / "home")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-2:] == ["handled", "loaded"], proc.stderr


def test_signals_held_hands_a_signal_to_the_handler_before_it_once_the_block_ends():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_held():
                signal.raise_signal(signal.SIGINT)
                time.sleep(0.01)  # (a handler would run here, between bytecodes)
                reached = True
        assert reached and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
