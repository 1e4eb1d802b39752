"""A stopped command whose exit hangs (a thread that never ends, as one waiting for a lock Ctrl-C left held) ends
anyway, ``TESSERA_EXIT_GRACE_S`` after it said it was stopped, with the stop's status; a call of ``main`` from
Python is left alone (its process goes on).

The real command in a process of its own: ``tessera ops`` with its handler replaced by one that starts a thread
which never ends and then sends itself SIGINT or SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = """
import os, signal, sys, threading
import flows.commands.ops as ops
from flows.commands import main

signum, whole, hangs = int(sys.argv[1]), sys.argv[2] == "whole", sys.argv[3] == "hangs"

def stuck(args):
    if hangs:
        threading.Thread(target=threading.Event().wait, name="never-ends").start()
    os.kill(os.getpid(), signum)
    threading.Event().wait(30)  # the stop arrives here
    return 0

ops.handle = stuck
sys.argv = ["tessera", "ops"]
status = main(None if whole else ["ops"])
if not whole:
    print("guard armed:", any(t.name == "tessera-exit-grace" for t in threading.enumerate()), flush=True)
    os._exit(status)
sys.exit(status)
"""


def _stopped(signum: int, whole: bool, grace: str = "0.2", hangs: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "TESSERA_EXIT_GRACE_S": grace}
    env.pop("TESSERA_DEBUG", None)
    return subprocess.run([sys.executable, "-c", DRIVER, str(int(signum)), "whole" if whole else "call",
                           "hangs" if hangs else "ends"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("signum", "status", "said"), [(signal.SIGINT, 130, "tessera: interrupted"),
                                                        (signal.SIGTERM, 143, "tessera: terminated (SIGTERM)")])
@pytest.mark.process
def test_a_stopped_command_whose_threads_never_end_exits_after_the_grace(signum, status, said):
    proc = _stopped(signum, whole=True)  # without the guard: a hang, and subprocess's timeout fails the test
    assert proc.returncode == status, proc.stderr
    assert proc.stderr.splitlines() == [said, "tessera: still exiting 0.2 s after the stop; ending now"]


@pytest.mark.parametrize("grace", ["soon", "-1", "nan"])
@pytest.mark.process
def test_a_grace_that_is_no_number_of_seconds_is_named_and_the_default_kept(grace):
    proc = _stopped(signal.SIGINT, whole=True, grace=grace, hangs=False)  # exits at once: the guard never fires
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines() == ["tessera: interrupted", "tessera: TESSERA_EXIT_GRACE_S must be a number of "
                                        f"seconds, 0 or more (got '{grace}'); ending within 30 s"]


@pytest.mark.process
def test_main_called_from_python_arms_no_exit():
    proc = _stopped(signal.SIGINT, whole=False)
    assert proc.returncode == 130 and proc.stdout == "guard armed: False\n", proc.stderr


RAY_DRIVER = """
import os, signal, sys, threading
import ray
import flows.commands.ops as ops
from flows.commands import main

temp = sys.argv[1]

def stuck(args):
    ray.init(num_cpus=1, include_dashboard=False, _temp_dir=temp)
    threading.Thread(target=threading.Event().wait, name="never-ends").start()
    os.kill(os.getpid(), signal.SIGINT)
    threading.Event().wait(60)
    return 0

ops.handle = stuck
sys.argv = ["tessera", "ops"]
sys.exit(main())
"""


def _processes_marked(mark: str) -> list[str]:
    """The processes whose environment holds ``mark`` (Ray's processes rename themselves: ``ray::DashboardAgent``)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80])
        except OSError:
            continue
    return found


@pytest.mark.ray
@pytest.mark.slow  # a local Ray of its own, in a process of its own
def test_a_command_ended_after_the_grace_shuts_its_ray_down_first():
    """Ending the process outright would leave the local Ray it started behind (its agents live on, orphaned)."""
    import tempfile
    import time

    temp = tempfile.mkdtemp(prefix="tg", dir="/tmp")  # a short path: Ray's sockets live under it
    mark = f"TESSERA_EXIT_GRACE_TEST={os.getpid()}-{time.monotonic_ns()}"  # inherited by every process it starts
    env = {**os.environ, "TESSERA_EXIT_GRACE_S": "1", mark.split("=")[0]: mark.split("=")[1]}
    env.pop("TESSERA_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", RAY_DRIVER, temp], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert "tessera: still exiting 1 s after the stop; ending now" in proc.stderr
    deadline = time.monotonic() + 30
    while _processes_marked(mark) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_marked(mark) == []
