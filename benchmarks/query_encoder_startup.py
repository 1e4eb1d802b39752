"""Start-up cost of an uncached one-query ``tessera run``: the torch-free query encoder vs torch.

Runs, side by side in one run, ``--rounds`` fresh processes of
``python -m flows run FLOW --index INDEX --queries "honey bees" --no-cache`` for each
flow (``dense``, ``hybrid``) with ``TESSERA_QUERY_ENCODER=auto`` (the ONNX Runtime
fast path of ``operators.models.onnx_query_encoder``) and ``=torch`` (sentence-
transformers, as before). The order of the two alternates per round, so a burst of
load from elsewhere hits both alike. It prints the median wall and CPU (user + sys
of the child process) seconds of each and the torch/fast ratios, and checks that
both give the same ranking. The goal: the same documents for a fraction of the CPU.

Without ``--index`` it ingests the first ``--docs`` documents of data/sample/corpus.jsonl
into a temporary ``TESSERA_HOME`` first; a first ``TESSERA_QUERY_ENCODER=onnx`` run then
exports MiniLM to ONNX there (once, not timed).

    nice -n 10 .venv/bin/python benchmarks/query_encoder_startup.py              # 5 rounds, sample index
    .venv/bin/python benchmarks/query_encoder_startup.py --home /tmp/h --index sample --rounds 10
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO_ROOT

MODES = ("auto", "torch")  # fast path (when it applies), old path


def run(flow: str, index: str, query: str, mode: str, env: dict[str, str], out: Path) -> tuple[float, float]:
    """One fresh ``flows run`` process: (wall seconds, CPU seconds), its ranking written to ``out``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flows", "run", flow, "--index", index, "--queries", query,
                           "--no-cache", "--quiet", "--out", str(out)], cwd=REPO_ROOT, capture_output=True,
                          text=True, env={**env, "TESSERA_QUERY_ENCODER": mode})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"{flow} ({mode}) failed:\n{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ranking(file: Path) -> list[str]:
    return [line.split()[2] for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", default=None, help="TESSERA_HOME to use (default: a temporary folder)")
    parser.add_argument("--index", default=None, help="index name or path (default: ingest the sample corpus)")
    parser.add_argument("--docs", type=int, default=200, help="sample documents to ingest when --index is unset")
    parser.add_argument("--flows", default="dense,hybrid", help="comma-separated flows to time")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per flow and encoder")
    parser.add_argument("--query", default="honey bees")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args()

    home = Path(args.home or tempfile.mkdtemp(prefix="tessera-qe-"))
    env = {**os.environ, "TESSERA_HOME": str(home)}
    work = Path(tempfile.mkdtemp(prefix="qe-runs-"))
    index = args.index
    if index is None:
        index = "qe-sample"
        corpus = work / "corpus.jsonl"
        lines = (REPO_ROOT / "data" / "sample" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:args.docs]
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"ingesting {len(lines)} sample documents into {home}/indices/{index} ...", flush=True)
        subprocess.run([sys.executable, "-m", "flows", "ingest", "--source", str(corpus), "--index", index,
                        "--executor", "local", "--quiet"], cwd=REPO_ROOT, env=env, check=True)
    print("warm-up (exports the encoder to ONNX when missing, fills the page cache) ...", flush=True)
    run("dense", index, args.query, "onnx", env, work / "warm.trec")

    flows = [f.strip() for f in args.flows.split(",") if f.strip()]
    times = {(flow, mode): ([], []) for flow in flows for mode in MODES}
    for round_ in range(args.rounds):
        for flow in flows:
            order = MODES if round_ % 2 == 0 else MODES[::-1]
            rankings = {}
            for mode in order:
                out = work / f"{flow}-{mode}.trec"
                wall, cpu = run(flow, index, args.query, mode, env, out)
                times[flow, mode][0].append(wall)
                times[flow, mode][1].append(cpu)
                rankings[mode] = ranking(out)
            if rankings["auto"] != rankings["torch"]:
                sys.exit(f"{flow}: the two encoders ranked differently:\n{rankings}")
        print(f"round {round_ + 1}/{args.rounds} done", flush=True)

    results = []
    print(f"\n{'flow':8} {'encoder':8} {'wall s (median)':>16} {'CPU s (median)':>15}")
    for flow in flows:
        for mode in MODES:
            wall, cpu = (statistics.median(v) for v in times[flow, mode])
            name = "onnx" if mode == "auto" else "torch"
            results.append({"flow": flow, "encoder": name, "wall_s": wall, "cpu_s": cpu,
                            "wall_runs": times[flow, mode][0], "cpu_runs": times[flow, mode][1]})
            print(f"{flow:8} {name:8} {wall:16.2f} {cpu:15.2f}")
        fast, slow = results[-2], results[-1]
        print(f"{flow:8} {'torch/onnx':8} {slow['wall_s'] / fast['wall_s']:15.2f}x "
              f"{slow['cpu_s'] / fast['cpu_s']:14.2f}x   (same ranking: yes)")
    if args.json:
        summary = {"rounds": args.rounds, "index": index, "results": results}
        Path(args.json).write_text(json.dumps(summary, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
