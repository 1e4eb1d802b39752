"""Where a pytest run waits: a pytest plugin that sets each test's wall time (setup, call and teardown) against the
CPU time its process and the child processes it reaped spent meanwhile. What is left is a wait: a sleep, a timeout
run out, a server starting or stopping, a lock held by another worker. ``make test-fast``'s two workers leave a core
idle while one waits, so waits are what to look for there; ``suite_cpu.py`` says where the CPU goes instead.

    PYTHONPATH=benchmarks .venv/bin/python -m pytest -p suite_waits -n 2 -m "not ray and not slow" tests/serve

At the end it prints the totals and the tests that waited longest (``--waits-top N``, default 25), with pytest-xdist
too: each worker measures its own tests and sends the figures with the teardown report. A child process that is not
waited for (killed and left, or still running) counts as waiting, not as its CPU.
"""

from __future__ import annotations

import os
import time

import pytest

_START = pytest.StashKey[tuple[float, os.times_result]]()
_rows: list[tuple[str, float, float, float]] = []  # (test, wall, own CPU, children's CPU), in the controller


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--waits-top", type=int, default=25, help="suite_waits: how many of the longest waits to list")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_START] = (time.perf_counter(), os.times())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    if call.when == "teardown" and _START in item.stash:
        wall0, cpu0 = item.stash[_START]
        cpu1 = os.times()
        own = cpu1.user + cpu1.system - cpu0.user - cpu0.system
        children = cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system
        outcome.get_result().user_properties.append(("suite_waits", (time.perf_counter() - wall0, own, children)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == "suite_waits" and report.when == "teardown":
            _rows.append((report.nodeid, *value))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if not _rows:
        return
    wall, own, children = (sum(row[i] for row in _rows) for i in (1, 2, 3))
    write = terminalreporter.write_line
    terminalreporter.section("where the tests waited (suite_waits)")
    write(f"{len(_rows)} tests: {wall:.1f} s of wall time, {own:.1f} CPU-seconds in their processes, "
          f"{children:.1f} in child processes they reaped, {wall - own - children:.1f} s waiting")
    write("  wait s   wall s    cpu s  test")
    longest = sorted(_rows, key=lambda row: row[1] - row[2] - row[3], reverse=True)
    for test, w, o, c in longest[:config.getoption("--waits-top")]:
        write(f"{max(w - o - c, 0.0):8.2f} {w:8.2f} {max(o + c, 0.0):8.2f}  {test}")  # (CPU time comes in 10 ms ticks)
