"""postprocess.dedup: the contract, by chunk and by document, the best-ranked row stays."""

from __future__ import annotations

import pyarrow as pa

from operators.registry import create
from operators.testing import OperatorContract, sample_results


class TestResultDedupContract(OperatorContract):
    operator_name = "postprocess.dedup"

    def make_operator(self, **params):
        return create("postprocess.dedup", {"by": "docno", **params}, step_id="dd")


def results(rows):
    table = pa.Table.from_pylist([{"qid": q, "query": "x", "docno": d, "doc_id": doc, "score": s, "rank": r}
                                  for q, d, doc, s, r in rows])
    return table.set_column(table.column_names.index("rank"), "rank", table.column("rank").cast(pa.int32()))


def test_by_docno_keeps_the_best_ranked_row():
    table = results([("q", "c", "D2", 0.2, 3), ("q", "a", "D1", 0.9, 1), ("q", "c", "D2", 0.8, 2),
                     ("r", "c", "D2", 0.5, 1)])
    out = create("postprocess.dedup", {})(table)
    assert [(r["qid"], r["docno"], r["score"], r["rank"]) for r in out.to_pylist()] == [
        ("q", "a", 0.9, 1), ("q", "c", 0.8, 2), ("r", "c", 0.5, 1)]


def test_by_doc_id_keeps_one_chunk_per_document_and_null_ids():
    table = results([("q", "a#1", "A", 0.9, 1), ("q", "a#2", "A", 0.8, 2), ("q", "b#1", "B", 0.7, 3),
                     ("q", "x", None, 0.6, 4), ("q", "y", None, 0.5, 5), ("q", "a#3", "A", 0.4, 6)])
    out = create("postprocess.dedup", {"by": "doc_id"})(table)
    assert out.column("docno").to_pylist() == ["a#1", "b#1", "x", "y"]
    assert out.column("rank").to_pylist() == [1, 2, 3, 4]


def test_a_result_table_without_duplicates_is_unchanged():
    table = sample_results(2, 4)
    out = create("postprocess.dedup", {})(table)
    assert out.to_pylist() == table.to_pylist()
