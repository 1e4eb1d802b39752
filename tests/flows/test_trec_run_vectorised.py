"""The vectorised TREC run writer (``flows.trec_run``) writes the same bytes as the list-based one it replaced
(``tests/flows/trec_run_reference.py``), on a real BM25 ranking of the sample corpus, without a Python object per
row."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path

import ir_measures
import numpy as np
import pyarrow as pa
import pytest

from flows.trec_run import WHITESPACE, trec_rows, trec_run
from operators.errors import SpecError
from tests.flows.trec_run_reference import trec_run as reference_trec_run

CORPUS = Path(__file__).resolve().parents[2] / "data" / "sample" / "corpus.jsonl"


@pytest.fixture(scope="module")
def bm25_results() -> pa.Table:
    """BM25 (bm25s, as ``retrieve.bm25`` ranks) of the sample corpus's 1,000 documents for 300 queries made of its
    titles, top 20 each: real float scores, ties among documents that share the matched words, many qids."""
    import bm25s

    docs = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([d["title"] + " " + d["text"] for d in docs], show_progress=False),
                    show_progress=False)
    queries = [d["title"] for d in docs[::3][:300]]
    found, scores = retriever.retrieve(bm25s.tokenize(queries, show_progress=False), k=20, show_progress=False,
                                       n_threads=1)
    rows = [(f"q{i}", query, docs[doc]["_id"], docs[doc]["text"][:40], float(score), rank)
            for i, query in enumerate(queries)
            for rank, (doc, score) in enumerate(zip(found[i], scores[i]), 1)]
    names = ("qid", "query", "docno", "text", "score", "rank")
    table = pa.table({name: [row[j] for row in rows] for j, name in enumerate(names)})
    return table.set_column(5, "rank", table["rank"].cast(pa.int32()))


def _write(table: pa.Table, tag: str) -> bytes:
    buffer = io.BytesIO()
    trec_rows(table, tag).write(buffer)
    return buffer.getvalue()


def test_the_run_of_a_real_ranking_is_byte_identical_to_the_list_based_writer(bm25_results):
    scores = bm25_results["score"].to_numpy()
    assert len(set(bm25_results["qid"].to_pylist())) == 300
    assert len(np.unique(scores)) < len(scores) and not np.all(scores == np.round(scores))  # ties, fractions
    shuffled = bm25_results.take(np.random.default_rng(0).permutation(bm25_results.num_rows))  # any row order
    for table in (bm25_results, shuffled, bm25_results.drop_columns(["rank"]),  # ranked by score
                  bm25_results.set_column(4, "score", pa.array(np.round(scores, 1))),  # many more ties
                  bm25_results.drop_columns(["score"])):  # -rank
        assert _write(table, "bm25 run") == reference_trec_run(table, "bm25 run").encode()
    text = trec_run(bm25_results, "bm25 run")
    parsed = list(ir_measures.read_trec_run(io.StringIO(text)))
    assert len(parsed) == bm25_results.num_rows == len(text.splitlines())
    assert {(r.query_id, r.doc_id) for r in parsed} == set(zip(bm25_results["qid"].to_pylist(),
                                                               bm25_results["docno"].to_pylist()))
    assert {line.split()[-1] for line in text.splitlines()} == {"bm25_run"}


def test_chunks_missing_scores_and_odd_floats_are_written_as_before(bm25_results):
    rng = np.random.default_rng(1)
    n = bm25_results.num_rows
    doc_id = [None if rng.random() < 0.05 else f"{d[:5]}" for d in bm25_results["docno"].to_pylist()]  # chunks
    odd = np.array([0.0, -0.0, 1e-5, -2.5e-7, 1e17, 123456789012345.6, np.inf, -np.inf, 3.0, 1e-45, 3.4e38,
                    0.1, 1e16, 9.99e-5, 1e-4, -12.0])
    scores = pa.array([None if rng.random() < 0.01 else float(v) for v in rng.choice(odd, n)], pa.float64())
    ranks = pa.array([None if rng.random() < 0.01 else int(r) for r in rng.integers(1, 20, n)], pa.int32())
    table = bm25_results.set_column(4, "score", scores).set_column(5, "rank", ranks).append_column(
        "doc_id", pa.array(doc_id, pa.string()))
    assert _write(table, "t") == reference_trec_run(table, "t").encode()
    assert _write(table.slice(0, 0), "t") == b""


def test_ids_with_any_whitespace_python_knows_are_refused_naming_them(bm25_results):
    chars = [chr(c) for c in range(0x3100)]
    import pyarrow.compute as pc

    assert pc.match_substring_regex(pa.array(chars), WHITESPACE).to_pylist() == [c.isspace() for c in chars]
    for bad in ("d\u3000x", "d\x1fx", "d x", ""):
        docnos = bm25_results["docno"].to_pylist()
        docnos[7] = bad
        with pytest.raises(SpecError) as err:
            trec_rows(bm25_results.set_column(2, "docno", pa.array(docnos)))
        assert err.value.field == "out" and f"the docno {bad!r}" in err.value.message


class _Discard(io.RawIOBase):
    def write(self, data) -> int:
        return len(data)


def test_writing_holds_no_python_object_per_row(bm25_results):
    """The list-based writer held ~330 bytes of Python objects a row (qid, docno and line strings, floats, the
    order): ~0.5 GB at a million rows. This one holds numpy arrays of the order and scores."""
    table = pa.concat_tables([bm25_results] * 4)
    tracemalloc.start()
    try:
        trec_rows(table, "t").write(_Discard())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 120 * table.num_rows, f"{peak / table.num_rows:.0f} bytes a row"
