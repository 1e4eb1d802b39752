"""Writing a large result as a TREC run: the vectorised writer (``flows.trec_run.trec_rows``) against the list-based
one it replaced (kept as the tests' reference, ``tests/flows/trec_run_reference.py``).

Each writer runs in a fresh process on the same result (``--queries`` x ``--per-query`` rows, scores rounded so
that ties occur, read from Parquet under the bench cache), alternating, ``--rounds`` times; a thread samples the
process's RSS every 5 ms. It prints seconds and peak RSS above the table's own, per writer and round, and whether
the two files are byte-identical.

    .venv/bin/python benchmarks/trec_writer.py                   # 1M rows: 10,000 queries x 100
    .venv/bin/python benchmarks/trec_writer.py --queries 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import CACHE, REPO_ROOT, checked_args, rss_bytes, run  # noqa: E402


def make_result(path: Path, queries: int, per_query: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    n = queries * per_query
    qid = np.repeat(np.char.add("q", np.arange(queries).astype(str)), per_query)
    docno = np.char.add("MED-", rng.integers(0, 500_000, n).astype(str))
    score = np.round(rng.normal(10, 3, n), 2)  # two decimals: ties within a query
    rank = np.tile(np.arange(1, per_query + 1, dtype=np.int32), queries)
    text = np.full(n, "a passage of about sixty characters, as a real result has one")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"qid": qid, "query": qid, "docno": docno, "text": text, "score": score,
                             "rank": rank}), path)


def write_once(writer: str, result: Path, out: Path) -> dict:
    """One writer over ``result`` into ``out``, in this process: seconds and peak RSS above the table's."""
    import pyarrow.parquet as pq

    if writer == "before":
        from tests.flows.trec_run_reference import trec_run

        def write(table, handle):  # as tessera run --out wrote it: the whole text, then the file
            handle.write(trec_run(table, "bench").encode())
    else:
        from flows.trec_run import trec_rows

        def write(table, handle):
            trec_rows(table, "bench").write(handle)
    table = pq.read_table(result)
    gc.collect()
    base, peak, done = rss_bytes(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes())
            time.sleep(0.005)

    threading.Thread(target=sample, daemon=True).start()
    started = time.perf_counter()
    with open(out, "wb") as handle:
        write(table, handle)
    seconds = time.perf_counter() - started
    done.set()
    peak[0] = max(peak[0], rss_bytes())
    return {"writer": writer, "seconds": round(seconds, 2), "peak_extra_mb": round((peak[0] - base) / 2**20)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--per-query", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", choices=("before", "after"), help=argparse.SUPPRESS)  # a child's writer
    args = checked_args(parser)
    folder = CACHE / "trec_writer"
    result = folder / f"result-{args.queries}x{args.per_query}.parquet"
    if args.one:
        print(json.dumps(write_once(args.one, result, folder / f"{args.one}.trec")))
        return
    if not result.exists():
        make_result(result, args.queries, args.per_query)
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for writer in runs:
            child = subprocess.run([sys.executable, __file__, "--queries", str(args.queries), "--per-query",
                                    str(args.per_query), "--one", writer], capture_output=True, text=True,
                                   cwd=REPO_ROOT, check=True)
            print(child.stdout.strip())
            runs[writer].append(json.loads(child.stdout.strip().splitlines()[-1]))
    before, after = (folder / "before.trec").read_bytes(), (folder / "after.trec").read_bytes()
    print(f"identical files: {before == after} ({len(after):,} bytes)")
    fastest = {writer: min(r["seconds"] for r in rounds) for writer, rounds in runs.items()}
    print(f"before / after, fastest of {args.rounds}: {fastest['before'] / max(fastest['after'], 0.005):.1f}x time")


if __name__ == "__main__":
    run(main)
