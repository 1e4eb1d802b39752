"""Fan-in unions for the fusion tests: each branch's rows ranked by its own step, then unioned."""

from __future__ import annotations

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
