"""Where the test suite's CPU goes: ``make test``'s two runs (or any command), with the command and every process it
starts (its descendants, the Ray they start included) sampled from ``/proc`` once a second, then their CPU-seconds
summed by kind (a pytest run, a Ray actor by its name, a Serve replica, Chromium, a ``tessera`` command, ...).
``make test`` is bound by CPU on 2 cores (docs/testing.md), so this says what to make cheaper; timings alone do not
(a test's duration there is mostly waiting for the cores).

    .venv/bin/python benchmarks/suite_cpu.py                     # make test's runs (tests/run_suite.sh)
    .venv/bin/python benchmarks/suite_cpu.py -- .venv/bin/python -m pytest tests/ui -m ray -p no:cacheprovider

A process that lives under a second may be missed, and with it the processes it started (their parent is unknown).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repository on sys.path)

REPO = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")
MAKE_TEST = ["bash", "tests/run_suite.sh", ".venv/bin/python", "-p", "no:cacheprovider", "-p", "no:schemathesis"]


def read_process(pid: str) -> tuple[str, float, str] | None:
    """(parent pid, CPU-seconds, command line) of ``pid``, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    name = stat[stat.find("(") + 1: stat.rfind(")")]
    return fields[1], (int(fields[11]) + int(fields[12])) / TICKS, command or f"[{name}]"


def kind(command: str) -> str:
    """The process's kind, for the summary."""
    if command.startswith("ray::"):
        return re.sub(r"\.\w+$", "", command.split()[0])  # ray::ServeReplica:app:name, without the method it ran
    if "default_worker.py" in command:
        return "ray worker (before it ran anything)"
    if "exec(eval(sys.stdin" in command:
        return "pytest-xdist worker"
    if "-m pytest" in command:
        return "pytest (the Ray run)" if "ray and not slow" in command else "pytest"
    for name in ("chromedriver", "chromium", "postgres", "ipykernel", "raylet", "gcs_server"):
        if name in command:
            return name
    words = command.split()
    if len(words) > 2 and words[1].endswith("/tessera"):
        return f"tessera {words[2]}"
    script = next((w for w in words[1:3] if w.endswith(".py")), None)
    if script:  # Ray's own scripts (its log monitor, dashboard, ...) by their path in the package
        return "python " + script.split("site-packages/")[-1]
    return " ".join(words[:3])[:70]


def sample(root: int, seen: dict, stop: threading.Event) -> None:
    """Every second until ``stop``: the CPU time and latest name of ``root`` and of each process whose parent is one
    of them (kept when the parent is gone)."""
    ours = {str(root)}
    while not stop.is_set():
        for pid in sorted(filter(str.isdigit, os.listdir("/proc")), key=int):
            info = read_process(pid)
            if info is None or (pid not in ours and info[0] not in ours):
                continue
            ours.add(pid)
            _, cpu, command = info
            known = seen.get(pid)
            # a Ray worker renames itself once it runs an actor: keep the latest name
            seen[pid] = (cpu, command if known is None or command.startswith("ray::") else known[1])
        stop.wait(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=30, help="kinds to list (the rest are summed)")
    parser.add_argument("command", nargs="*", help="the command to run (default: make test's two runs)")
    args = parser.parse_args()
    seen: dict = {}
    stop = threading.Event()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as make test runs it
    started = time.perf_counter()
    child = subprocess.Popen(args.command or MAKE_TEST, cwd=REPO, env=env)
    sampler = threading.Thread(target=sample, args=(child.pid, seen, stop), daemon=True)
    sampler.start()
    status = child.wait()
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    totals, counts = collections.Counter(), collections.Counter()
    for cpu, command in seen.values():
        totals[kind(command)] += cpu
        counts[kind(command)] += 1
    total = sum(totals.values())
    print(f"\nexit status {status}; {wall:.0f} s wall, {total:.0f} CPU-seconds in {len(seen)} processes "
          f"({total / wall:.2f} cores busy on average, {os.cpu_count()} here)")
    listed = totals.most_common(args.top)
    for name, cpu in listed:
        print(f"{cpu:8.1f} s {cpu / total:6.1%} {counts[name]:5d}  {name}")
    rest = total - sum(cpu for _, cpu in listed)
    if rest:
        print(f"{rest:8.1f} s {rest / total:6.1%}        everything else")
    sys.exit(status)


if __name__ == "__main__":
    main()
