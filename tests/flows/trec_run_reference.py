"""The TREC run writer as it was before it was vectorised (Python lists, one string per line): the oracle that
tests/flows/test_trec_run_vectorised.py holds ``flows.trec_run`` to, byte for byte.

The ranking of a result table as a TREC run (``tessera run --out FILE.trec``, the benchmarker's runs).

A TREC run is ``qid Q0 docno rank score tag`` a line, split at whitespace, so an id that is empty or holds a space
or a tab cannot be written: the checks here run before a run starts (on the queries' qids) and before a file is
written (on the result's docnos).
"""

from __future__ import annotations

import pyarrow as pa

from operators.errors import SpecError, one_line


def check_trec_ids(values, what: str, hint: str = "") -> None:
    """Refuse the first id that a TREC run cannot hold (empty or with whitespace), naming it; ``hint`` says what to
    do instead."""
    bad = next((v for v in values if not v or any(ch.isspace() for ch in v)), None)
    if bad is not None:
        raise SpecError(f"a TREC run cannot hold the {what} {bad!r}: it is empty or has whitespace{hint}",
                        field="out")


def trec_run(table: pa.Table, tag: str = "tessera") -> str:
    """The ranking of a result table as a TREC run: ``qid Q0 docno rank score tag`` a line, by qid then rank.

    trec_eval and ir-measures order a query's documents by score (ties: by docno, descending), not by the rank
    column, and trec_eval holds a score as a 32-bit float. So the scores are written as 32-bit floats that
    decrease strictly with Tessera's rank: where a score ties with (or is above) the one ranked before it, as
    32-bit floats, it is nudged just below that one (by the smallest float32 step), and a query with a missing
    score gets ``-rank``. Evaluating the file then sees Tessera's order. A result without ``rank`` is ranked by
    ``score`` within each query; the rank written is 1, 2, ... in that order.

    Qrels judge documents, not chunks: a result whose rows are chunks (a ``doc_id`` that is not the row's
    ``docno``) is written one line per document, its ``doc_id``, where its best chunk is ranked (max-passage).
    """
    import numpy as np

    missing = [c for c in ("qid", "docno") if c not in table.column_names]
    if missing or not {"rank", "score"} & set(table.column_names):
        raise SpecError(f"a TREC run needs the columns qid, docno and rank or score; the result has "
                        f"{one_line(table.column_names, 160)}", field="out")
    tag = "_".join(str(tag).split()) or "tessera"
    qids = [str(q) for q in table.column("qid").to_pylist()]
    docnos = [str(d) for d in table.column("docno").to_pylist()]
    if "doc_id" in table.column_names:
        docnos = [docno if doc is None else str(doc) for docno, doc in zip(docnos, table.column("doc_id").to_pylist())]
    for what, values in (("qid", qids), ("docno", docnos)):
        check_trec_ids(values, what)
    scores = (np.array([np.nan if v is None else float(v) for v in table.column("score").to_pylist()])
              if "score" in table.column_names else np.full(table.num_rows, np.nan))
    if "rank" in table.column_names:
        ranks = np.array([np.inf if v is None else float(v) for v in table.column("rank").to_pylist()])
    else:
        ranks = -np.nan_to_num(scores, nan=-np.inf)  # by score, descending
    order = sorted(range(table.num_rows), key=lambda i: (qids[i], ranks[i], i))
    if "doc_id" in table.column_names:  # chunks: each document where its best chunk is
        seen: set[tuple[str, str]] = set()
        order = [i for i in order if not ((qids[i], docnos[i]) in seen or seen.add((qids[i], docnos[i])))]
    lines: list[str] = []
    start = 0
    while start < len(order):  # one query at a time
        end = start
        while end < len(order) and qids[order[end]] == qids[order[start]]:
            end += 1
        rows = order[start:end]
        own = scores[rows]
        written = (-np.arange(1, len(rows) + 1) if np.isnan(own).any() else own).astype(np.float32)
        for j in range(1, len(rows)):
            if not written[j] < written[j - 1]:
                written[j] = np.nextafter(written[j - 1], np.float32(-np.inf))
        lines += [f"{qids[i]} Q0 {docnos[i]} {n} {float(score)!r} {tag}\n"
                  for n, (i, score) in enumerate(zip(rows, written), 1)]
        start = end
    return "".join(lines)
