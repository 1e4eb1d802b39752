"""rerank.embedding: contract, and cosine reranking of SciFact BM25 candidates checked against numpy."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators import create
from operators.errors import OperatorError
from operators.models import load_sentence_transformer
from operators.testing import OperatorContract, sample_results

N_QUERIES, K = 2, 20


@pytest.mark.integration
class TestEmbeddingRerankContract(OperatorContract):
    operator_name = "rerank.embedding"

    def make_input(self, n_queries: int = 3, per_query: int = 2) -> pa.Table:
        return sample_results(n_queries, per_query)  # two candidates a query keep the encodes few on CPU


@pytest.fixture(scope="module")
def scifact_top20(shared_data) -> pa.Table:
    """BM25 (bm25s, English stop words) top-20 of the first two SciFact test queries, as a results table."""
    import bm25s

    folder = shared_data / "scifact"
    docs = [json.loads(line) for line in open(folder / "corpus.jsonl", encoding="utf-8")]
    queries = {q["_id"]: q["text"] for q in map(json.loads, open(folder / "queries.jsonl", encoding="utf-8"))}
    test_qids = list(dict.fromkeys(line.split("\t")[0] for line in open(folder / "qrels" / "test.tsv")
                                   if not line.startswith("query-id")))[:N_QUERIES]
    index = bm25s.BM25()
    index.index(bm25s.tokenize([f"{d['title']} {d['text']}" for d in docs], stopwords="en", show_progress=False),
                show_progress=False)
    hits, scores = index.retrieve(bm25s.tokenize([queries[q] for q in test_qids], stopwords="en",
                                                 show_progress=False), k=K, show_progress=False)
    rows = []
    for qid, doc_ids, doc_scores in zip(test_qids, hits, scores):
        for rank, (i, score) in enumerate(zip(doc_ids, doc_scores), start=1):
            doc = docs[int(i)]
            rows.append({"qid": qid, "query": queries[qid], "docno": doc["_id"], "title": doc["title"],
                         "text": doc["text"], "score": float(score), "rank": rank})
    table = pa.Table.from_pylist(rows)
    return table.set_column(table.column_names.index("rank"), "rank", table.column("rank").cast(pa.int32()))


def cosine(query: str, texts: list[str]) -> np.ndarray:
    """Cosine similarity from the model's raw (unnormalised) vectors, computed here with numpy."""
    model = load_sentence_transformer()
    q = model.encode([query], convert_to_numpy=True)[0].astype(np.float64)
    d = model.encode(texts, convert_to_numpy=True).astype(np.float64)
    return d @ q / (np.linalg.norm(d, axis=1) * np.linalg.norm(q))


def rows_of(table: pa.Table, qid: str) -> list[dict]:
    return table.filter(pc.equal(table.column("qid"), qid)).to_pylist()


@pytest.fixture(scope="module")
def expected_cosine(scifact_top20) -> dict[str, dict[str, float]]:
    """Per qid, per docno: cosine(query, title + newline + text), computed independently of the operator."""
    expected = {}
    for qid in dict.fromkeys(scifact_top20.column("qid").to_pylist()):
        rows = rows_of(scifact_top20, qid)
        values = cosine(rows[0]["query"], [f"{r['title']}\n{r['text']}" for r in rows])
        expected[qid] = dict(zip([r["docno"] for r in rows], values))
    return expected


@pytest.mark.data
def test_reranks_scifact_bm25_top20_by_cosine(scifact_top20, expected_cosine):
    out = create("rerank.embedding", {"n": None}, step_id="emb")(scifact_top20)
    assert out.num_rows == scifact_top20.num_rows
    for qid, cos in expected_cosine.items():
        incoming = [r["docno"] for r in rows_of(scifact_top20, qid)]
        order = sorted(incoming, key=lambda d: (-cos[d], d))
        got = rows_of(out, qid)
        assert [r["docno"] for r in got] == order
        np.testing.assert_allclose([r["score_emb"] for r in got], [cos[d] for d in order], atol=1e-5)
        assert [r["rank"] for r in got] == list(range(1, K + 1)) == [r["rank_emb"] for r in got]
        assert order != incoming, "cosine kept BM25's exact order: the test would not see a reranking"


@pytest.mark.data
def test_n_limits_what_is_reranked(scifact_top20, expected_cosine):
    out = create("rerank.embedding", {"n": 5}, step_id="emb")(scifact_top20)
    for qid, cos in expected_cosine.items():
        incoming, got = [r["docno"] for r in rows_of(scifact_top20, qid)], rows_of(out, qid)
        assert [r["docno"] for r in got[:5]] == sorted(incoming[:5], key=lambda d: (-cos[d], d))
        np.testing.assert_allclose([r["score_emb"] for r in got[:5]], [cos[r["docno"]] for r in got[:5]], atol=1e-5)
        assert [r["docno"] for r in got[5:]] == incoming[5:]  # the tail keeps BM25's order beneath
        assert all(r["score_emb"] is None for r in got[5:])
        scores = [r["score"] for r in got]
        assert scores == sorted(scores, reverse=True) and len(set(scores)) == K


@pytest.mark.integration
def test_query_param_overrides_the_flow_query():
    table = sample_results(2, 4).drop_columns(["query"])  # no flow query at all: the param is used
    text = "opera singers and composers"
    out = create("rerank.embedding", {"query": text, "title_column": None}, step_id="emb")(table)
    for qid in ("q1", "q2"):
        incoming = rows_of(table, qid)
        expected = dict(zip([r["docno"] for r in incoming], cosine(text, [r["text"] for r in incoming])))
        got = rows_of(out, qid)
        np.testing.assert_allclose([r["score_emb"] for r in got], [expected[r["docno"]] for r in got], atol=1e-5)
        assert [r["score_emb"] for r in got] == sorted((r["score_emb"] for r in got), reverse=True)


@pytest.mark.integration
def test_prompts_are_prepended():
    table = sample_results(1, 3)
    op = create("rerank.embedding", {"query_prompt": "query: ", "document_prompt": "passage: ",
                                     "title_column": None}, step_id="emb")
    got = {r["docno"]: r["score_emb"] for r in op(table).to_pylist()}
    texts = table.column("text").to_pylist()
    expected = cosine("query: " + table.column("query")[0].as_py(), ["passage: " + t for t in texts])
    np.testing.assert_allclose([got[d] for d in table.column("docno").to_pylist()], expected, atol=1e-5)


@pytest.mark.integration
def test_batched_scoring_equals_one_query_at_a_time():
    table = sample_results(3, 2)
    op = create("rerank.embedding")
    op.ensure_setup()
    queries = list(dict.fromkeys(table.column("query").to_pylist()))
    texts = [[r["text"] for r in rows_of(table, qid)] for qid in ("q1", "q2", "q3")]
    batched = op.score_queries(queries, texts)
    for query, candidates, scores in zip(queries, texts, batched):
        np.testing.assert_allclose(scores, op.score_texts(query, candidates), atol=1e-5)


@pytest.mark.integration
def test_overlong_text_does_not_crash():
    table = sample_results(1, 3)
    long_text = " ".join(["honey bees pollinate flowers"] * 12_500)  # 50,000 words
    texts = table.column("text").to_pylist()
    table = table.set_column(table.column_names.index("text"), "text", pa.array([long_text, *texts[1:]]))
    op = create("rerank.embedding", step_id="emb")
    out = op(table)
    assert out.num_rows == 3 and op.drain_metadata() == {}
    assert all(np.isfinite(s) for s in out.column("score_emb").to_pylist())
    # truncated to the model's window, the text is still about what q1 asks (insects, honey, flowers)
    assert out.column("docno")[0].as_py() == table.column("docno")[0].as_py()


@pytest.mark.integration
def test_a_failing_query_degrades_alone():
    """A text column mixing strings (q1) and integers (q2): the batched encode fails, so each query is
    scored alone; q1 is reranked, q2 keeps its first-stage ranking and is marked degraded."""
    table = sample_results(2, 3)
    qids = table.column("qid").to_pylist()
    mixed = pa.UnionArray.from_dense(pa.array([0 if q == "q1" else 1 for q in qids], pa.int8()),
                                     pa.array(range(len(qids)), pa.int32()),
                                     [table.column("text").combine_chunks(), pa.array(range(1, len(qids) + 1))])
    table = table.set_column(table.column_names.index("text"), "text", mixed)
    op = create("rerank.embedding", {"title_column": None}, step_id="emb")
    out = op(table)
    metadata = op.drain_metadata()
    assert list(metadata) == ["q2"] and metadata["q2"]["degraded"]["step"] == "emb"
    q1, q2 = rows_of(out, "q1"), rows_of(out, "q2")
    assert all(r["score_emb"] is not None for r in q1)
    assert [r["docno"] for r in q2] == [r["docno"] for r in rows_of(table, "q2")]
    assert all(r["score_emb"] is None for r in q2)
    with pytest.raises(OperatorError, match="q2"):
        create("rerank.embedding", {"title_column": None, "on_error": "error"})(table)
