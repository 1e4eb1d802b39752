"""A ``tessera`` process drops Ray's "constructor arguments in the object store" line and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOISE = (b"[2026-11-27 21:43:47,113 E 11206 11206] core_worker.cc:2465: Actor with class name: "
         b"'MapWorker(ReadRange->MapBatches(A))' and ID: 'da61646fe52aadb78e3d406a01000000' has constructor "
         b"arguments in the object store and max_restarts > 0. If the arguments in the object store go out of "
         b"scope or are lost, the actor restart will fail. See https://github.com/ray-project/ray/issues/53727 "
         b"for more details.\n")
REAL = b"[2026-11-27 21:43:48,000 E 11206 11206] core_worker.cc:900: Failed to pin an object\n"


def run_filtered(body: str, **env: str) -> subprocess.CompletedProcess:
    """A process that turns the filter on the way ``tessera`` does, then runs ``body``."""
    script = (f"import os, sys\nfrom flows.executors.stderr_filter import filter_known_ray_noise\n"
              f"NOISE, REAL = {NOISE!r}, {REAL!r}\nfilter_known_ray_noise()\n{body}")
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", **env})


@pytest.mark.process
def test_the_known_line_is_dropped_and_every_other_byte_kept_in_order():
    body = ("os.write(2, b'\\rembedding 1/4')\nos.write(2, b'\\rembedding 4/4\\n')\n"
            "os.write(2, NOISE[:40])\nos.write(2, NOISE[40:] + REAL[:10])\nos.write(2, REAL[10:])\n"
            "os.write(2, b'[not a log line, no newline yet')\nos.write(2, b'] and now one\\n' + NOISE)\n"
            "print('tessera: error: a real one', file=sys.stderr)\n")
    done = run_filtered(body)
    assert done.returncode == 0
    written = (b"\rembedding 1/4\rembedding 4/4\n" + REAL + b"[not a log line, no newline yet] and now one\n")
    assert written in done.stderr and b"constructor arguments" not in done.stderr
    assert b"tessera: error: a real one\n" in done.stderr


@pytest.mark.process
def test_the_last_words_of_a_crashed_process_still_arrive():
    done = run_filtered("os.write(2, NOISE + REAL + b'[half a line')\nos.kill(os.getpid(), 9)\n")
    assert done.returncode == -9
    assert done.stderr == REAL + b"[half a line"


@pytest.mark.process
def test_raw_stderr_turns_it_off():
    done = run_filtered("os.write(2, NOISE)\n", TESSERA_RAW_STDERR="1")
    assert done.stderr == NOISE


@pytest.mark.process
def test_ctrl_c_to_the_process_group_leaves_the_filter_passing_the_commands_last_words():
    """A terminal sends Ctrl-C to every process of the command's group; the filter is one of them. The command
    takes Ctrl-C as a command started from a terminal does, whatever this test runs under (a shell's background
    job ignores SIGINT, and its children inherit that)."""
    script = ("import os, signal, sys, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "from flows.executors.stderr_filter import filter_known_ray_noise\n"
              "filter_known_ray_noise()\n"  # ready once inside the try: a Ctrl-C right after it is caught
              "try:\n    os.write(1, b'ready\\n')\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
              "    time.sleep(0.5)\n    os.write(2, b'tessera: cancelled\\n')\n    sys.exit(130)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"}, start_new_session=True)
    assert proc.stdout.readline() == b"ready\n"
    os.killpg(proc.pid, signal.SIGINT)  # at once: the filter process may still be starting (it ignores it from birth)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err == b"tessera: cancelled\n", err
