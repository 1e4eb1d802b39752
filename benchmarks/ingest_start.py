"""An ingestion's fixed start, side by side for two checkouts: seconds to the first staged document and to the
first committed shard.

Before any shard is processed, an ingestion checks its settings (the encoder's dimension among them), stages
the source and, on Ray, starts Ray and its actors. On the H200 that was 57 of the 916K ingestion's 144 s
(benchmarks/gpu/RESULTS.md). This runs ``ingest_scale.py``'s child for each checkout in turn, ``--rounds``
times, in a fresh process each, and stops it once its first shard is committed.

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/ingest_start.py --repos /tmp/before . --corpus CORPUS.jsonl --spec ingest
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def first_events(repo: Path, args: argparse.Namespace, work: Path) -> tuple[float, float]:
    """Seconds from the child's start to its first staging event and to its first committed shard."""
    env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, str(repo / "benchmarks" / "ingest_scale.py"), "--child", "--run", "1",
                              "--corpus", str(args.corpus), "--spec", args.spec, "--executor", args.executor,
                              "--shard-size", str(args.shard_size), "--work", str(work)],
                             env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stages, staging, committed = work / "stages-1.jsonl", float("nan"), float("nan")
    try:
        while time.perf_counter() - started < args.limit and child.poll() is None:
            lines = stages.read_text(encoding="utf-8").splitlines() if stages.exists() else []
            events = [json.loads(line) for line in lines]
            if events and staging != staging:  # nan: not seen yet
                staging = time.perf_counter() - started
            if any(e["stage"] == "ingest" and e["shards"] > 0 for e in events):
                committed = time.perf_counter() - started
                break
            time.sleep(0.05)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # Ray's processes die with it (their parent-death signal)
        child.wait()
    return staging, committed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=Path, nargs="+", required=True, help="checkouts to compare, in turn")
    parser.add_argument("--corpus", type=Path, required=True, help="a JSONL corpus (a slice of the scale corpus)")
    parser.add_argument("--spec", default="ingest")
    parser.add_argument("--executor", choices=("local", "ray"), default="ray")
    parser.add_argument("--shard-size", type=int, default=5000, help="smaller: the first commit comes sooner")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=float, default=300.0, help="seconds a run may take to commit a shard")
    args = parser.parse_args()
    times: dict[Path, list[tuple[float, float]]] = {repo: [] for repo in args.repos}
    with tempfile.TemporaryDirectory(prefix="ingest-start-") as scratch:
        for n in range(args.rounds):
            for i, repo in enumerate(args.repos):
                work = Path(scratch) / f"{i}-{n}"
                work.mkdir()
                times[repo].append(first_events(repo.resolve(), args, work))
                staging, committed = times[repo][-1]
                print(f"{repo} round {n + 1}: first staged document {staging:.1f} s, first committed shard "
                      f"{committed:.1f} s (load average {os.getloadavg()[0]:.1f})", flush=True)
    for repo, runs in times.items():
        print(f"{repo}: median {statistics.median(s for s, _ in runs):.1f} s to staging, "
              f"{statistics.median(c for _, c in runs):.1f} s to the first commit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
