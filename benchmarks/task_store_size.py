"""Task results in the task store: JSON in ``tasks.result`` (versions before) against zlib-compressed JSON in
``tasks.result_z`` (``serve.tasks.taskstore_db.CompressedJSON``), side by side in one run.

The results are real: the built-in ``hybrid`` flow without ``top_k`` (every fused row, as a task keeps it), one
SciFact query per task, over an index of SciFact's first ``--docs`` abstracts made by the real ingest (cached under
``$TESSERA_BENCH_CACHE``), each turned into the stored result by ``serve.tasks.results.task_result``, as
``serve.tasks.taskrunner.run_task`` does. Each round writes the same ``--tasks`` results into two new SQLite stores (the
order alternating between rounds): one UPDATE per task in its own transaction setting the status and the result,
into ``result`` (sa.JSON) on one side and ``result_z`` on the other; then reads every task back with
``TaskStore.task`` (which reads either column). Prints bytes per task of the result column and of the database file,
write and read seconds (medians over rounds) and each ratio, and zlib's levels 1 / 6 / 9 on the same results.

    nice -n 10 .venv/bin/python benchmarks/task_store_size.py [--tasks 200] [--docs 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from _common import CACHE, DATA, REPO_ROOT, SCIFACT


def ensure_index(docs: int) -> Path:
    """An index of SciFact's first ``docs`` abstracts (BM25 + MiniLM), made once by ``flows.ingest``."""
    index = CACHE / f"scifact-{docs}-index"
    if (index / "manifest.json").is_file():
        return index
    CACHE.mkdir(parents=True, exist_ok=True)
    source = CACHE / f"scifact-{docs}.jsonl"
    with open(SCIFACT, encoding="utf-8") as f, open(source, "w", encoding="utf-8") as out:
        out.writelines(line for line, _ in zip(f, range(docs)))
    print(f"building {index} (flows.ingest of {docs} SciFact abstracts)", flush=True)
    subprocess.run([sys.executable, "-m", "flows.ingest", "--index", str(index), "--source", str(source),
                    "--executor", "local", "--quiet"], check=True, cwd=REPO_ROOT,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return index


def hybrid_results(index: Path, tasks: int) -> list[tuple[dict, dict]]:
    """``tasks`` (query, stored result) pairs: ``hybrid`` run on one SciFact query each, as a task runs it."""
    import pyarrow as pa

    from flows.executors import make_executor
    from flows.spec import FlowSpec
    from serve.tasks.results import task_result

    with open(DATA / "scifact" / "queries.jsonl", encoding="utf-8") as f:
        queries = [{"qid": q["_id"], "query": q["text"]} for q in map(json.loads, f)]
    flow = FlowSpec.load("hybrid").with_index(str(index)).build()
    runner = make_executor("local", keep_history=False)
    pairs = []
    for i in range(tasks):
        query = dict(queries[i % len(queries)], qid=f"{queries[i % len(queries)]['qid']}#{i}")
        table = pa.table({"qid": [query["qid"]], "query": [query["query"]]})
        pairs.append((query, task_result(runner.run(flow, table))))
    return pairs


def one_side(folder: Path, column: str, pairs: list[tuple[dict, dict]]) -> dict[str, float]:
    """Write ``pairs`` into a new store's ``column`` and read them back: seconds, bytes, results equal."""
    import sqlalchemy as sa

    from serve.tasks.taskstore import TaskStore, tasks

    store = TaskStore(f"sqlite:///{folder / f'{column}.db'}")
    ids = [store.create_task("bench", "hybrid", {"steps": {}}, [query], ["bm25", "dense", "fused"])
           for query, _ in pairs]
    started = time.perf_counter()
    for task_id, (_, result) in zip(ids, pairs):
        with store.engine.begin() as conn:
            conn.execute(tasks.update().where(tasks.c.id == task_id)
                         .values(status="finished", updated=time.time(), **{column: result}))
    wrote = time.perf_counter() - started
    started = time.perf_counter()
    read = [store.task(task_id, "bench")["result"] for task_id in ids]
    reading = time.perf_counter() - started
    with store.engine.connect() as conn:
        column_bytes = conn.execute(sa.text(f"SELECT SUM(LENGTH(CAST({column} AS BLOB))) FROM tasks")).scalar()
    store.engine.dispose()  # the last connection closed checkpoints the WAL into the file
    return {"write_s": wrote, "read_s": reading, "column_bytes": column_bytes / len(ids),
            "file_bytes": (folder / f"{column}.db").stat().st_size / len(ids),
            "equal": read == [result for _, result in pairs]}


def zlib_levels(pairs: list[tuple[dict, dict]]) -> list[tuple[int, float, float, float]]:
    """Per zlib level: bytes per task, and ms per task to compress and to decompress (the type's JSON)."""
    texts = [json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode("utf-8") for _, r in pairs]
    rows = []
    for level in (1, 6, 9):
        started = time.perf_counter()
        packed = [zlib.compress(t, level) for t in texts]
        compress_s = time.perf_counter() - started
        started = time.perf_counter()
        for p in packed:
            zlib.decompress(p)
        decompress_s = time.perf_counter() - started
        rows.append((level, sum(map(len, packed)) / len(texts), 1000 * compress_s / len(texts),
                     1000 * decompress_s / len(texts)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks written into each store (default 200)")
    parser.add_argument("--docs", type=int, default=1000, help="SciFact abstracts in the index (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both sides, alternating (default 3)")
    args = parser.parse_args()

    from serve.tasks.taskstore_db import RESULT_ZLIB_LEVEL

    index = ensure_index(args.docs)
    started = time.perf_counter()
    pairs = hybrid_results(index, args.tasks)
    rows = statistics.mean(r["result_description"]["rows"] for _, r in pairs)
    print(f"{args.tasks} hybrid results over {index.name} in {time.perf_counter() - started:.1f} s, "
          f"{rows:.0f} rows per task on average", flush=True)

    runs: dict[str, list[dict[str, float]]] = {"result": [], "result_z": []}
    for round_ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="task-store-size-") as folder:
            for column in (("result", "result_z") if round_ % 2 == 0 else ("result_z", "result")):
                runs[column].append(one_side(Path(folder), column, pairs))
    assert all(run["equal"] for side in runs.values() for run in side), "a result read back differs"

    med = {column: {key: statistics.median(run[key] for run in side) for key in ("write_s", "read_s", "column_bytes",
                                                                              "file_bytes")}
           for column, side in runs.items()}
    old, new = med["result"], med["result_z"]
    print(f"\n{'':24}{'JSON (result)':>16}{f'zlib {RESULT_ZLIB_LEVEL} (result_z)':>22}{'ratio':>10}")
    for key, label, unit in (("column_bytes", "result bytes / task", 1), ("file_bytes", "file bytes / task", 1),
                             ("write_s", f"write s ({args.tasks} tasks)", 1), ("read_s", f"read s ({args.tasks} tasks)",
                                                                                1)):
        fmt = "{:>16,.0f}{:>22,.0f}" if "bytes" in key else "{:>16.3f}{:>22.3f}"
        print(f"{label:24}" + fmt.format(old[key] * unit, new[key] * unit) + f"{new[key] / old[key]:>10.3f}")
    print(f"(medians of {args.rounds} rounds; every result read back equal)")
    print("\nzlib level   bytes/task   compress ms/task   decompress ms/task")
    for level, size, compress_ms, decompress_ms in zlib_levels(pairs):
        print(f"{level:>10}{size:>13,.0f}{compress_ms:>19.2f}{decompress_ms:>21.2f}")


if __name__ == "__main__":
    main()
