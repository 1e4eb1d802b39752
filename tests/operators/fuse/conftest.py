"""Fan-in unions for the fusion tests (each branch's rows ranked by its own step, then unioned), and
``ranx.fuse``, the reference the fusion maths is checked against."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from operators.tables import concat, set_ranking
from operators.testing import SAMPLE_QUERIES, sample_documents


def union_of_branches(runs: dict[str, dict[str, list[tuple[str, float]]]]) -> pa.Table:
    """``{branch: {qid: [(docno, score), ...]}}`` -> the union a fan-in step receives.

    Doc columns (title, text) come from the bundled sample, keyed by docno, so the same
    docno carries the same doc columns in every branch, as it does after real retrieval.
    """
    docs = {row["docno"]: row for row in sample_documents(60).to_pylist()}
    pool = list(docs.values())
    parts = []
    for branch, by_qid in runs.items():
        rows = []
        for qid, hits in by_qid.items():
            for docno, score in hits:
                doc = docs.get(docno) or pool[sum(map(ord, docno)) % len(pool)]
                rows.append({"qid": qid, "query": SAMPLE_QUERIES.get(qid, f"query {qid}"), "docno": docno,
                             "title": doc["title"], "text": doc["text"]})
        if not rows:
            continue
        table = pa.Table.from_pylist(rows)
        scores = [s for hits in by_qid.values() for _, s in hits]
        parts.append(set_ranking(table, pa.array(scores, pa.float64()), branch))
    if not parts:  # every branch found nothing: an empty union that still has the result columns
        empty = pa.table({c: pa.array([], pa.string()) for c in ("qid", "query", "docno", "title", "text")})
        return set_ranking(empty, pa.array([], pa.float64()), next(iter(runs), "none"))
    return concat(parts)


@pytest.fixture
def make_union():
    return union_of_branches


RANX_FUSE = """
import json, sys
from ranx import Run, fuse
job = json.load(sys.stdin)
runs = [Run({q: dict(hits) for q, hits in by_q.items()}) for by_q in job["runs"]]
fused = [fuse(runs, **kwargs).to_dict() for kwargs in job["calls"]]
json.dump([{q: {d: float(s) for d, s in docs.items()} for q, docs in one.items()} for one in fused], sys.stdout)
"""


@pytest.fixture
def ranx_fuse():
    """``ranx_fuse(runs, *calls)``: for each dict of ``ranx.fuse`` keyword arguments in ``calls``, the fusion
    of ``{branch: {qid: [(docno, score)]}}`` as ``{(qid, docno): score}``.

    ranx runs in a child process with numba's JIT off, so its kernels run as the plain Python they are
    written in: compiling them took over a minute of the suite on 2 cores, for a few dozen documents.
    JSON keeps every float exactly."""

    def fuse(runs: dict[str, dict[str, list[tuple[str, float]]]], *calls: dict) -> list[dict[tuple, float]]:
        job = json.dumps({"runs": list(runs.values()), "calls": list(calls)})
        proc = subprocess.run([sys.executable, "-c", RANX_FUSE], input=job, capture_output=True, text=True,
                              env={**os.environ, "NUMBA_DISABLE_JIT": "1"}, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return [{(q, d): s for q, docs in one.items() for d, s in docs.items()} for one in json.loads(proc.stdout)]

    return fuse
