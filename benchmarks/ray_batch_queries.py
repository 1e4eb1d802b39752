"""Batch queries through the built-in ``hybrid`` flow: the Ray Data executor against the local one.

Each run is a fresh process (as ``tessera run --no-cache`` is): it builds the query set,
runs the flow once with ``keep_history=False`` and no step cache, and reports its phases:
``start`` (imports, and for Ray ``ray.init``), ``run`` (``executor.run``) and ``total``.
With ``--warm`` the process then runs the flow a second time, as a long-lived driver would
(a ``tessera serve`` task, a notebook). With ``--cluster`` the Ray side also runs as a job joining a
Ray cluster that is already up (``ray start --head``, started once here and stopped by its process
group at the end), as ``ray job submit`` runs it: no ``ray.init`` start-up in the run, as ``ray-cluster``.
Sizes and executors alternate, ``--repeat`` times;
medians are printed side by side with the speed ratio local / ray (goal: >= 0.9 at 1,000
queries, > 1 at 10,000+), and a straight line ``a + b * queries`` through each executor's
totals gives the fixed cost ``a`` and where the lines cross.

Queries are real: SciFact, HotpotQA and MuSiQue questions from ``../shared/data`` (2,194
distinct), in that order, repeated with distinct ids (``<set>:<id>#<pass>``) beyond that.
The index is SciFact's 5,183 abstracts with BM25 and MiniLM vectors (``--index``; built with
``tessera ingest`` when it is missing).

    nice -n 10 .venv/bin/python benchmarks/ray_batch_queries.py [--sizes 1000 10000] [--repeat 2] [--warm]
        [--one-thread] [--before DIR] [--cluster]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from _common import DATA, REPO_ROOT

QUERY_SETS = ("scifact", "hotpotqa_dev_subset", "hotpotqa_train100_hipporag", "musique_dev_subset",
              "musique_train100_hipporag")
DEFAULT_INDEX = Path(os.environ.get("TMPDIR", "/tmp")) / "tessera-bench-scifact-index"


def real_queries(n: int):
    """``n`` queries (``qid, query``): the real sets' questions in order, repeated with distinct ids."""
    import pyarrow as pa

    base = []
    for name in QUERY_SETS:
        with open(DATA / name / "queries.jsonl", encoding="utf-8") as f:
            base += [(f"{name}:{q['_id']}", q["text"]) for q in map(json.loads, f) if q.get("text")]
    rows = [(qid if i < len(base) else f"{qid}#{i // len(base)}", text)
            for i, (qid, text) in ((i, base[i % len(base)]) for i in range(n))]
    return pa.table({"qid": [r[0] for r in rows], "query": [r[1] for r in rows]})


def child(executor: str, queries: int, index: str, warm: bool) -> None:
    """One measured process: prints its phases as JSON on the last line."""
    began = time.perf_counter()
    from flows.executors import make_executor
    from flows.spec import FlowSpec

    flow = FlowSpec.load("hybrid").with_index(index).build()
    table = real_queries(queries)
    if executor == "ray":
        from flows.executors.ray_env import ensure_ray

        ensure_ray()
    started = time.perf_counter()
    runner = make_executor(executor, keep_history=False)
    result = runner.run(flow, table)
    ran = time.perf_counter()
    phases = {"start": started - began, "run": ran - started, "total": ran - began,
              "rows": result.table.num_rows, "steps": {s: r.seconds for s, r in result.steps.items()}}
    if warm:
        again = runner.run(flow, table)
        phases["warm"] = time.perf_counter() - ran
        phases["warm_equal"] = again.table.equals(result.table)
    print(json.dumps(phases), flush=True)


@contextlib.contextmanager
def running_cluster(num_cpus: int) -> Iterator[dict[str, str]]:
    """A one-node Ray cluster for the whole benchmark (``ray start --head --block``, its own temp dir and
    token), stopped by its process group; yields the environment a job needs to join it."""
    from flows.executors.ray_env import WORKER_NICENESS  # here: the ray-before side's children lack it

    temp = Path(tempfile.mkdtemp(prefix="tbq", dir="/tmp"))  # short: Ray's socket paths have a length limit
    (temp / "token").write_text(secrets.token_hex(32), encoding="utf-8")
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(temp / "token"), "RAY_AUTH_MODE": "token",
           "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",  # SIGTERM stops it at once
           **WORKER_NICENESS}  # as a Ray that Tessera starts runs them
    env.pop("RAY_ADDRESS", None)
    log, head = temp / "head.log", None
    try:
        with open(log, "w", encoding="utf-8") as out:  # `ray start`, from this interpreter's Ray
            head = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
                                     "--num-cpus", str(num_cpus), "--include-dashboard=false",
                                     "--disable-usage-stats", "--temp-dir", str(temp)],
                                    env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 180
        started = r"ray start --address='([^']+)'"
        while not (found := re.search(started, log.read_text(encoding="utf-8", errors="replace"))):
            if head.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the Ray head did not start:\n{log.read_text(encoding='utf-8')[-3000:]}")
            time.sleep(0.5)
        yield {"RAY_ADDRESS": found.group(1), "RAY_AUTH_TOKEN_PATH": env["RAY_AUTH_TOKEN_PATH"],
               "RAY_AUTH_MODE": "token"}
    finally:
        if head is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(head.pid, signal.SIGTERM)
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(head.pid, signal.SIGKILL)
                head.wait()
        shutil.rmtree(temp, ignore_errors=True)


def measure(side: str, queries: int, index: str, warm: bool, code: str | None = None,
            cluster: dict[str, str] | None = None) -> dict:
    """One fresh process for ``side`` (``local``, ``local-1t``: torch on one thread, as each Ray worker runs it,
    ``ray``, ``ray-before``: on the ``flows``/``operators`` packages in the folder ``code``, ``ray-cluster``:
    joining the running cluster whose environment is ``cluster``)."""
    executor = side.split("-")[0]
    command = [sys.executable, __file__, "--child", executor, "--sizes", str(queries), "--index", index]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if side == "local-1t":
        env["OMP_NUM_THREADS"] = "1"
    if side == "ray-before":
        env["PYTHONPATH"] = os.pathsep.join([code, env.get("PYTHONPATH", "")])
    if side == "ray-cluster":
        env.update(cluster)
    started = time.perf_counter()
    out = subprocess.run(command + (["--warm"] if warm else []), check=False, capture_output=True, text=True,
                         cwd=REPO_ROOT, env=env)
    wall = time.perf_counter() - started
    if out.returncode:
        sys.exit(f"{executor} at {queries} queries failed:\n{out.stderr[-3000:]}")
    phases = json.loads(out.stdout.strip().splitlines()[-1])
    phases["wall"] = wall
    return phases


def ensure_index(index: Path) -> None:
    if (index / "manifest.json").is_file():
        return
    print(f"building {index} (tessera ingest of SciFact: BM25 + MiniLM, minutes on 2 cores)", flush=True)
    subprocess.run([sys.executable, "-m", "flows.ingest", "--index", str(index), "--source",
                    str(DATA / "scifact" / "corpus.jsonl"), "--executor", "local", "--quiet"],
                   check=True, cwd=REPO_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def line(xs: list[int], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``a + b * x``."""
    if len(set(xs)) < 2:
        return ys[0], 0.0
    slope, intercept = statistics.linear_regression(xs, ys)
    return intercept, slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--index", default=str(DEFAULT_INDEX))
    parser.add_argument("--warm", action="store_true", help="also time a second run in the same process")
    parser.add_argument("--before", help="also run the Ray side on the flows/ and operators/ in this folder "
                        "(e.g. `git archive COMMIT flows operators | tar -x -C DIR`), as 'ray-before'")
    parser.add_argument("--one-thread", action="store_true", help="also run the local side with OMP_NUM_THREADS=1 "
                        "(torch on one thread, as in each Ray worker: the same floats, so the same table), "
                        "as 'local-1t'")
    parser.add_argument("--cluster", action="store_true", help="also run the Ray side as a job joining a Ray "
                        "cluster started once for the benchmark (as `ray job submit` does), as 'ray-cluster'")
    parser.add_argument("--child", choices=("local", "ray"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.sizes[0], args.index, args.warm)
        return
    ensure_index(Path(args.index))
    with running_cluster(os.cpu_count() or 1) if args.cluster else contextlib.nullcontext() as cluster:
        runs = run_sides(args, cluster)
    report(args, runs)


def run_sides(args: argparse.Namespace, cluster: dict[str, str] | None) -> dict[tuple[str, int], list[dict]]:
    """Every side at every size, alternating, ``--repeat`` times."""
    runs: dict[tuple[str, int], list[dict]] = {}
    for _ in range(args.repeat):
        for size in args.sizes:
            for executor in ("local", *(["local-1t"] if args.one_thread else []), "ray",
                             *(["ray-before"] if args.before else []), *(["ray-cluster"] if cluster else [])):
                phases = measure(executor, size, args.index, args.warm, args.before, cluster)
                runs.setdefault((executor, size), []).append(phases)
                warm = f", warm {phases['warm']:.1f}" if args.warm else ""
                print(f"  {executor:<11} {size:>6} queries: wall {phases['wall']:6.1f} s (start {phases['start']:.1f}, "
                      f"run {phases['run']:.1f}{warm}); load {os.getloadavg()[0]:.2f}", flush=True)
    return runs


def report(args: argparse.Namespace, runs: dict[tuple[str, int], list[dict]]) -> None:
    """Medians side by side, the ratios, each side's fixed cost and cost per query, and the crossover."""
    keys = ("wall", "start", "run", "warm") if args.warm else ("wall", "start", "run")
    med = {key: {k: statistics.median(p[k] for p in v) for k in keys} for key, v in runs.items()}
    print(f"\nmedians of {args.repeat}, load average {os.getloadavg()[0]:.2f} (1 min) at the end")
    print(f"{'queries':>8} {'local s':>9} {'ray s':>9} {'local/ray':>10} {'run only':>10}"
          + (f" {'warm l/r':>10}" if args.warm else ""))
    for size in args.sizes:
        lo, ra = med[("local", size)], med[("ray", size)]
        print(f"{size:>8} {lo['wall']:>9.1f} {ra['wall']:>9.1f} {lo['wall'] / ra['wall']:>10.2f} "
              f"{lo['run'] / ra['run']:>10.2f}" + (f" {lo['warm'] / ra['warm']:>10.2f}" if args.warm else ""))
        if args.one_thread:
            one = med[("local-1t", size)]
            print(f"{'':>8} local on one thread: {one['wall']:.1f} s, local-1t/ray {one['wall'] / ra['wall']:.2f}")
        if args.before:
            before = med[("ray-before", size)]
            print(f"{'':>8} ray before: {before['wall']:.1f} s, local/ray-before {lo['wall'] / before['wall']:.2f}")
        if args.cluster:
            joined = med[("ray-cluster", size)]
            print(f"{'':>8} ray joining a running cluster: {joined['wall']:.1f} s (start {joined['start']:.1f}), "
                  f"local/ray-cluster {lo['wall'] / joined['wall']:.2f}")
    sides = ("local", "ray", *(["ray-cluster"] if args.cluster else []))
    fits = {ex: line(args.sizes, [med[(ex, s)]["wall"] for s in args.sizes]) for ex in sides}
    for ex, (a, b) in fits.items():
        print(f"{ex}: {a:.1f} s fixed + {b * 1000:.2f} s per 1,000 queries")
    al, bl = fits["local"]
    for ex in sides[1:]:
        ar, br = fits[ex]
        if bl > br:
            print(f"crossover ({ex} faster beyond): {(ar - al) / (bl - br):,.0f} queries")
        else:
            print(f"no crossover: {ex}'s cost per query is not below local's")


if __name__ == "__main__":
    main()
