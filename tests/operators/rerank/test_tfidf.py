"""rerank.tfidf: contract, and every similarity against an independent computation on real text."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators import create
from operators.errors import ParamsError
from operators.testing import OperatorContract, sample_results


class TestTfidfRerankContract(OperatorContract):
    operator_name = "rerank.tfidf"


class TestTfidfRerankBm25Contract(OperatorContract):
    operator_name = "rerank.tfidf"

    def make_operator(self, **params):
        return create(self.operator_name, {"similarity": "bm25", **params})


@pytest.fixture(scope="module")
def results() -> pa.Table:
    """Three queries with ten Wikipedia candidates each (different candidates per query)."""
    return sample_results(3, 10)


def candidates(table: pa.Table, qid: str) -> tuple[str, list[str], list[str]]:
    """(query, docnos, texts as the reranker reads them: title, newline, text) of one qid, in incoming order."""
    rows = table.filter(pc.equal(table.column("qid"), qid)).to_pylist()
    return rows[0]["query"], [r["docno"] for r in rows], [f"{r['title']}\n{r['text']}" for r in rows]


def own_scores(out: pa.Table, qid: str, step: str) -> dict[str, float]:
    rows = out.filter(pc.equal(out.column("qid"), qid)).to_pylist()
    assert [r[f"score_{step}"] for r in rows] == sorted((r[f"score_{step}"] for r in rows), reverse=True)
    return {r["docno"]: r[f"score_{step}"] for r in rows}


def tfidf_vectorizer(**params):
    """sklearn's ``TfidfVectorizer``, the reference, imported when a test runs: at the top of the module, sklearn (and
    the scipy.stats it imports) was about 0.9 s of the collection of each make test-fast worker, this module's tests
    running on one of them."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(**params)


def numpy_similarity(similarity: str, query: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """The similarities written out with numpy on dense vectors (not sklearn.metrics.pairwise).

    A query without any term of the fitted vocabulary scores 0 everywhere (the operator's documented rule).
    """
    if not query.any():
        return np.zeros(len(docs))
    if similarity == "cosine":
        norms = np.linalg.norm(docs, axis=1) * np.linalg.norm(query)
        return np.divide(docs @ query, norms, out=np.zeros(len(docs)), where=norms > 0)
    if similarity == "euclidean":
        return -np.sqrt(((docs - query) ** 2).sum(axis=1))
    return -np.abs(docs - query).sum(axis=1)


@pytest.mark.parametrize("similarity", ["cosine", "euclidean", "manhattan"])
@pytest.mark.parametrize("norm", ["l2", None])
def test_tfidf_similarities_match_numpy(results, similarity, norm):
    out = create("rerank.tfidf", {"similarity": similarity, "norm": norm, "n": None}, step_id="tf")(results)
    for qid in ("q1", "q2", "q3"):
        query, docnos, texts = candidates(results, qid)
        vectorizer = tfidf_vectorizer(norm=norm).fit(texts)  # fitted on this query's candidates only
        expected = numpy_similarity(similarity, vectorizer.transform([query]).toarray()[0],
                                    vectorizer.transform(texts).toarray())
        got = own_scores(out, qid, "tf")
        np.testing.assert_allclose([got[d] for d in docnos], expected, rtol=1e-9, atol=1e-12)
        assert len(set(np.round(expected, 9))) > 1, f"{qid}: every candidate scored alike, nothing was checked"


def test_euclidean_ranks_like_cosine_on_unit_vectors(results):
    by = {s: create("rerank.tfidf", {"similarity": s})(results).column("docno").to_pylist()
          for s in ("cosine", "euclidean")}
    assert by["cosine"] == by["euclidean"]


@pytest.mark.parametrize("k1, b", [(1.5, 0.75), (0.9, 0.4)])
def test_bm25_matches_bm25s_directly(results, k1, b):
    import bm25s

    out = create("rerank.tfidf", {"similarity": "bm25", "k1": k1, "b": b}, step_id="bm")(results)
    for qid in ("q1", "q2", "q3"):
        query, docnos, texts = candidates(results, qid)
        index = bm25s.BM25(k1=k1, b=b)  # bm25s' own tokenizer: lowercase, (?u)\b\w\w+\b, no stop words
        index.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)
        query_tokens = bm25s.tokenize([query], stopwords=None, return_ids=False, show_progress=False)[0]
        expected = index.get_scores(query_tokens)
        got = own_scores(out, qid, "bm")
        np.testing.assert_allclose([got[d] for d in docnos], expected, rtol=1e-5)
        assert max(expected) > 0


def test_fit_on_all_uses_every_candidate_of_the_batch(results):
    out = create("rerank.tfidf", {"fit_on": "all"}, step_id="tf")(results)
    everything = [text for qid in ("q1", "q2", "q3") for text in candidates(results, qid)[2]]
    vectorizer = tfidf_vectorizer().fit(everything)
    per_query = create("rerank.tfidf", step_id="tf")(results)
    for qid in ("q1", "q2", "q3"):
        query, docnos, texts = candidates(results, qid)
        expected = numpy_similarity("cosine", vectorizer.transform([query]).toarray()[0],
                                    vectorizer.transform(texts).toarray())
        got = own_scores(out, qid, "tf")
        np.testing.assert_allclose([got[d] for d in docnos], expected, rtol=1e-9, atol=1e-12)
        assert own_scores(per_query, qid, "tf") != got  # the IDF really changed with the fitting set


def test_fit_on_all_bm25_scores_against_the_batch_index(results):
    import bm25s

    everything = [text for qid in ("q1", "q2", "q3") for text in candidates(results, qid)[2]]
    index = bm25s.BM25()
    index.index(bm25s.tokenize(everything, stopwords=None, show_progress=False), show_progress=False)
    out = create("rerank.tfidf", {"similarity": "bm25", "fit_on": "all"}, step_id="bm")(results)
    for qid in ("q1", "q2", "q3"):
        query, docnos, texts = candidates(results, qid)
        scores = index.get_scores(bm25s.tokenize([query], stopwords=None, return_ids=False, show_progress=False)[0])
        got = own_scores(out, qid, "bm")
        np.testing.assert_allclose([got[d] for d in docnos], [scores[everything.index(t)] for t in texts], rtol=1e-5)


def test_stop_words_and_lowercase_reach_both_tokenisers():
    table = pa.table({"qid": ["q"] * 3, "query": ["The OPERA"] * 3, "docno": ["a", "b", "c"],
                      "text": ["the the the the story", "an opera in three acts", "OPERA opera"],
                      "rank": pa.array([1, 2, 3], pa.int32())})
    for similarity in ("cosine", "bm25"):
        out = create("rerank.tfidf", {"similarity": similarity, "stop_words": "english"})(table)
        assert out.column("docno").to_pylist() == ["c", "b", "a"], similarity
        assert out.column("score")[2].as_py() == 0.0  # 'the' is a stop word: doc a shares nothing
        cased = create("rerank.tfidf", {"similarity": similarity, "lowercase": False,
                                        "stop_words": "english"})(table)
        assert cased.column("docno")[0].as_py() == "c"  # only 'OPERA' in c matches the query's 'OPERA'


@pytest.mark.parametrize("similarity", ["cosine", "euclidean", "manhattan", "bm25"])
def test_empty_query_and_empty_texts_score_zero(results, similarity):
    no_query = create("rerank.tfidf", {"similarity": similarity, "query": "  "})(results)
    assert set(no_query.column("score").to_pylist()) == {0.0}
    assert no_query.column("docno").to_pylist() != []  # nothing was dropped
    blank = results.set_column(results.column_names.index("text"), "text", pa.array([""] * results.num_rows))
    blank = blank.drop_columns(["title"])
    out = create("rerank.tfidf", {"similarity": similarity})(blank)
    assert set(out.column("score").to_pylist()) == {0.0} and out.num_rows == results.num_rows
    for qid in ("q1", "q2", "q3"):  # ties keep the incoming order
        assert out.filter(pc.equal(out.column("qid"), qid)).column("docno").to_pylist() == candidates(results, qid)[1]


def test_candidates_that_score_alike_keep_the_first_stages_order_not_docnos(results):
    """Text without a query term scores 0 and two copies of a text score alike: the first stage's order stays (the
    ranking it had is all that tells them apart), whatever their docnos, as the docstring promises."""
    rows = results.filter(pc.equal(results.column("qid"), "q1")).to_pylist()
    rows = sorted(rows, key=lambda r: r["docno"], reverse=True)  # the first stage ranked them against docno order
    for rank, row in enumerate(rows, 1):
        row.update(rank=rank, score=float(len(rows) - rank), query="opera composer")
    rows[3]["text"] = rows[6]["text"] = rows[1]["text"] = "An opera composer wrote it."
    rows[3]["title"] = rows[6]["title"] = rows[1]["title"] = None
    table = pa.Table.from_pylist(rows, schema=results.schema)
    out = create("rerank.tfidf", {}, step_id="tf")(table).to_pylist()
    incoming = [r["docno"] for r in rows]
    copies = [incoming[1], incoming[3], incoming[6]]
    assert [r["docno"] for r in out[:3]] == copies and len({r["score_tf"] for r in out[:3]}) == 1
    rest = [r for r in out[3:] if r["score_tf"] == 0.0]
    assert len(rest) >= 3 and [r["docno"] for r in rest] == [d for d in incoming if d in {r["docno"] for r in rest}]
    assert [r["rank"] for r in out] == list(range(1, len(out) + 1))


def test_query_param_and_n(results):
    out = create("rerank.tfidf", {"query": "opera composer", "n": 4}, step_id="tf")(results)
    for qid in ("q1", "q2", "q3"):
        _, docnos, texts = candidates(results, qid)
        vectorizer = tfidf_vectorizer().fit(texts[:4])
        expected = numpy_similarity("cosine", vectorizer.transform(["opera composer"]).toarray()[0],
                                    vectorizer.transform(texts[:4]).toarray())
        rows = out.filter(pc.equal(out.column("qid"), qid)).to_pylist()
        assert [r["docno"] for r in rows[:4]] == [docnos[i] for i in sorted(range(4), key=lambda i: (-expected[i], i))]
        assert [r["docno"] for r in rows[4:]] == docnos[4:] and all(r["score_tf"] is None for r in rows[4:])


def test_bad_params_name_the_field():
    with pytest.raises(ParamsError, match="params.similarity"):
        create("rerank.tfidf", {"similarity": "jaccard"})
    with pytest.raises(ParamsError, match="params.b"):
        create("rerank.tfidf", {"b": 2})


def test_fit_on_all_is_not_cached_as_its_scores_depend_on_the_batch(tmp_path):
    """A query's scores under ``fit_on: all`` come from the statistics of every query's candidates: the step cache
    (one entry a query) gave "honey bees" its scores from a batch with "opera singers" in a run beside "gothic
    cathedrals" (0.5754 against 0.5687 fresh, in a user's run)."""
    from flows.api import Flow
    from operators.testing import SAMPLE_CORPUS

    def rerank(fit_on: str) -> Flow:
        return Flow.load({"name": "tf", "steps": {
            "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(SAMPLE_CORPUS), "k": 8}},
            "tf": {"op": "rerank.tfidf", "params": {"n": 8, "fit_on": fit_on}}}})

    def scores(result) -> list[float]:
        rows = [r for r in result.table.to_pylist() if r["qid"] == "1"]
        return [r["score_tf"] for r in sorted(rows, key=lambda r: r["docno"])]

    cache = tmp_path / "cache"
    assert not create("rerank.tfidf", {"fit_on": "all"}).cacheable and create("rerank.tfidf", {}).cacheable
    rerank("all").run(["honey bees", "opera singers"], cache=cache)
    again = rerank("all").run(["honey bees", "gothic cathedrals"], cache=cache)
    fresh = rerank("all").run(["honey bees", "gothic cathedrals"])
    assert scores(again) == scores(fresh)
    assert again.steps["tf"].hits == 0 and again.steps["bm25"].hits == 1  # the retriever's entry stands
