"""A benchmark whose step cache the disk refuses for one flow writes it again for the next once space came back, as
``Flow.run`` asks again each run; the refusal is said once. Before, the benchmark kept the one answer for all its
flows: after the first refused write nothing more was stored until the benchmark ended. A real full disk (a tmpfs of
256 KiB in a mount namespace of the test's own, as root; skipped where this user may not make one), filled by a file
that the benchmark's own reporter removes when the first flow's run is saved; a real benchmark in a child process.
On a cache it may read but not write (a real read-only bind mount), each flow is served its hits, and the report
and ``bench.json`` say that nothing was stored."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.bench.test_own_data import BEIR, write_dataset

pytestmark = [pytest.mark.process, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a tmpfs mount")]

REPO = Path(__file__).resolve().parents[3]
SMALL_DISK = 'mount -t tmpfs -o size=256k tmpfs "$0" && exec "$@"'
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
BENCH = """
import json, os, sqlite3, sys
from pathlib import Path
from flows.bench.console import BenchReporter
from flows.bench.core import BenchOptions, benchmark

disk, dataset, specs, out = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), Path(sys.argv[4])
filler = disk / "filler"
fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
try:
    while os.write(fd, b"x" * 4096):
        pass
except OSError:
    pass  # the disk is full
os.close(fd)


class FreedAfterTheFirstFlow(BenchReporter):
    def flow_finished(self, name, message):
        super().flow_finished(name, message)
        filler.unlink(missing_ok=True)  # space comes back while the benchmark goes on


result = benchmark(BenchOptions(dataset=dataset, flows=specs, out=out, index_dir=out.parent / "indices",
                                cache_dir=disk / "cache", mlflow=False), FreedAfterTheFirstFlow(enabled=False))
database = disk / "cache" / "index.sqlite"  # read here: the tmpfs goes with this process's mount namespace
stored = sqlite3.connect(database).execute("SELECT flow FROM steps").fetchall() if database.is_file() else []
print(json.dumps(sorted(flow for flow, in stored)))
"""


def two_flows(tmp_path: Path, dataset: Path) -> list[str]:
    """``--flow NAME=SPEC`` of two BM25 flows whose steps are keyed apart (their k)."""
    specs = []
    for name, k in (("first", 3), ("second", 4)):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: '{dataset}/corpus.jsonl', "
            f"k: {k}}}}}\n", encoding="utf-8")
        specs.append(f"{name}={tmp_path / f'{name}.yaml'}")
    return specs


def mounted_or_skip(script: str, folder: Path, what: str) -> None:
    """Skip, naming ``what``, where ``script`` (a mount in a namespace of its own) cannot run here."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "sh", "-c", script, str(folder), "true"],
                                                         capture_output=True).returncode != 0:
        pytest.skip(f"no {what} here")


def bench_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a child benchmark: offline, its home under ``tmp_path``, this checkout."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TESSERA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO),
           **extra}
    env.pop("TESSERA_DEBUG", None)
    return env


def test_a_flow_after_a_refused_write_stores_its_steps_once_space_came_back(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted_or_skip(SMALL_DISK, disk, "tmpfs mount")
    dataset = write_dataset(tmp_path / "d", BEIR)
    specs = two_flows(tmp_path, dataset)
    env = bench_env(tmp_path)
    done = subprocess.run(["unshare", "-m", "sh", "-c", SMALL_DISK, str(disk), sys.executable, "-c", BENCH, str(disk),
                           str(dataset), ",".join(specs), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == ["second"], done.stderr  # was []: nothing stored
    assert done.stderr.count(f"the step cache {disk / 'cache'} cannot be written (") == 1, done.stderr


@pytest.fixture(scope="module")
def read_only_runs(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """Two benchmarks of the same two flows: the first fills the step cache (``first/``), the second reads it on a
    read-only bind mount (``second/``); the folder both wrote under and the second's process. Made once for the
    tests below, which check what each says of it: two `tessera bench` processes for both, not two each."""
    tmp_path = tmp_path_factory.mktemp("read-only")
    cache = tmp_path / "cache"
    cache.mkdir()
    mounted_or_skip(READ_ONLY, cache, "read-only bind mount")
    dataset = write_dataset(tmp_path / "d", BEIR)
    env = bench_env(tmp_path, COLUMNS="200")

    def bench(out: str, *wrap: str) -> subprocess.CompletedProcess:
        flows = [arg for spec in two_flows(tmp_path, dataset) for arg in ("--flow", spec)]
        return subprocess.run([*wrap, sys.executable, "-m", "flows", "bench", "--dataset", str(dataset), *flows,
                               "--out", str(tmp_path / out), "--cache-dir", str(cache), "--no-mlflow",
                               "--quiet", "--k", "3"], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)

    first = bench("first")
    assert first.returncode == 0, first.stderr
    done = bench("second", "unshare", "-m", "sh", "-c", READ_ONLY, str(cache))
    assert done.returncode == 0, done.stderr
    return tmp_path, done


def test_a_read_only_step_cache_serves_every_flow_and_is_said_once(read_only_runs):
    """Asked again for each flow, a cache on a read-only mount still serves each flow its hits, said in one line for
    the benchmark, not once a flow."""
    tmp_path, done = read_only_runs
    cache = tmp_path / "cache"
    assert done.stderr.count(f"the step cache {cache} cannot be written (a read-only file system)") == 1, done.stderr
    summary = json.loads((tmp_path / "second" / "bench.json").read_text(encoding="utf-8"))
    assert {name: run["step_cache_hits"] for name, run in summary["flows"].items()} == {
        "first": 1.0, "second": 1.0}, done.stdout


def test_a_benchmark_on_a_read_only_step_cache_says_nothing_was_stored(read_only_runs):
    """Its report and ``bench.json`` say that nothing was stored beside the share read from it. Before, they said
    ``(100% from the step cache)`` as for a cache that stored too."""
    tmp_path, _ = read_only_runs
    runs = {out: json.loads((tmp_path / out / "bench.json").read_text())["flows"] for out in ("first", "second")}
    assert {out: [(f["step_cache_hits"], f["step_cache_nothing_stored"]) for f in flows.values()]
            for out, flows in runs.items()} == {"first": [(0.0, None)] * 2, "second": [(1.0, "read-only")] * 2}
    assert "(100% from the step cache; nothing stored in the step cache (read-only))" in \
        (tmp_path / "second" / "report.md").read_text()
    assert "nothing stored" not in (tmp_path / "first" / "report.md").read_text()
