"""Cutting a retrieval result into query batches: does the cost depend on how many chunks its columns have?

A step's output is the concatenation of its batches' outputs, so its columns come in
many chunks. ``operators.tables.group_by_qid`` (which ``scope_batches`` uses to hand a
query-scope operator whole queries) once took each query's rows with its own
``Table.take``; Arrow concatenates a chunked column on every such call, so the cost
grew with queries x rows. Mining 3,000 pseudo-queries spent minutes there (4 s since).
A batch is now one slice of the grouped table; before, it concatenated one slice per
query (also measured here).

The table: ``--queries`` queries x ``--k`` SciFact documents each (title + text, like a
retrieve step's rows), built as ``--chunks`` concatenated parts and once combined into
one chunk. Both are cut with ``scope_batches`` as a query-scope step would see them,
with the per-query ``take`` the old code did, and with the per-query slices concatenated
that the code before this one did, alternating, ``--repeat`` passes.
Goal: chunked / one-chunk <= 1.5 (chunking costs nothing that matters).

    .venv/bin/python benchmarks/query_batches.py [--queries 1000] [--k 60] [--chunks 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyarrow as pa

from _common import SCIFACT, checked_args, read_beir_corpus, run


def result_table(queries: int, k: int, chunks: int) -> pa.Table:
    """``queries`` x ``k`` rows of real SciFact passages, as ``chunks`` concatenated parts."""
    ids, titles, texts = read_beir_corpus(SCIFACT)
    rng = np.random.default_rng(0)
    parts = []
    for part in np.array_split(np.arange(queries), chunks):
        if not len(part):  # more chunks than queries: no empty part (its columns would have no type)
            continue
        docs = rng.integers(0, len(ids), len(part) * k)
        parts.append(pa.table({
            "qid": np.repeat(part, k).astype(str), "docno": [ids[d] for d in docs],
            "text": [f"{titles[d]}\n{texts[d]}" for d in docs], "score": rng.random(len(docs)),
            "rank": np.tile(np.arange(1, k + 1, dtype=np.int32), len(part))}))
    return pa.concat_tables(parts)


def per_query_take(table: pa.Table) -> int:
    """The old grouping: one ``take`` per query (the reference the fix is measured against)."""
    qids = table.column("qid").to_numpy(zero_copy_only=False)
    _, first, inverse = np.unique(qids, return_index=True, return_inverse=True)
    rows = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[rows], np.arange(len(first) + 1))
    return sum(table.take(pa.array(rows[bounds[g]:bounds[g + 1]])).num_rows for g in np.argsort(first, kind="stable"))


def concat_per_query_slices(table: pa.Table, batch_size: int) -> int:
    """The grouping before this one: a batch concatenated one slice per query (a chunk per query)."""
    from operators.tables import concat, qid_groups

    rows, pending, size = 0, [], 0
    for _, group in qid_groups(table):
        pending.append(group)
        size += group.num_rows
        if size >= batch_size:
            rows += concat(pending).num_rows
            pending, size = [], 0
    return rows + (concat(pending).num_rows if pending else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=60)
    parser.add_argument("--chunks", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = checked_args(parser)

    from flows.executors.base import scope_batches
    from operators import create

    op = create("postprocess.reduce", {}, step_id="reduce")  # any query-scope operator: only its scope is read
    assert op.scope == "query"
    chunked = result_table(args.queries, args.k, args.chunks)
    combined = chunked.combine_chunks()
    sides = {"scope_batches, chunked": lambda: sum(b.num_rows for b in scope_batches(op, chunked, 256)),
             "scope_batches, one chunk": lambda: sum(b.num_rows for b in scope_batches(op, combined, 256)),
             "per-query take, chunked (old)": lambda: per_query_take(chunked),
             "per-query slices, concat": lambda: concat_per_query_slices(chunked, 256)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.repeat):
        for name, cut in sides.items():
            started = time.perf_counter()
            assert cut() == chunked.num_rows
            times[name].append(time.perf_counter() - started)
    print(f"{args.queries} queries x {args.k} rows ({chunked.num_rows} rows), {args.chunks} chunks; "
          f"median of {args.repeat}")
    median = {name: statistics.median(t) for name, t in times.items()}
    for name, seconds in median.items():
        print(f"  {name:<30} {seconds * 1000:10.1f} ms")
    ratio = median["scope_batches, chunked"] / median["scope_batches, one chunk"]
    print(f"chunked / one chunk: {ratio:.2f} (goal <= 1.5): {'met' if ratio <= 1.5 else 'MISSED'}")
    print(f"old per-query take / scope_batches (chunked): "
          f"{median['per-query take, chunked (old)'] / median['scope_batches, chunked']:.0f}x")
    print(f"per-query slices concatenated / scope_batches (chunked): "
          f"{median['per-query slices, concat'] / median['scope_batches, chunked']:.1f}x")


if __name__ == "__main__":
    run(main)
