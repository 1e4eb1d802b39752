"""retrieve.corpus_bm25: the contract, real rankings over the bundled sample, the corpus in the cache key."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from flows.cache import step_key
from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.errors import OperatorError, ParamsError
from operators.registry import create
from operators.testing import SAMPLE_QUERIES, OperatorContract
from operators.testing import sample_queries as queries


class TestCorpusBM25Contract(OperatorContract):
    operator_name = "retrieve.corpus_bm25"

    def make_operator(self, **params):
        return create("retrieve.corpus_bm25", {"k": 5, **params}, step_id="bm25")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return queries(n_queries)  # a retriever reads queries, not results


def test_obvious_answers_rank_first():
    op = create("retrieve.corpus_bm25", {"k": 5}, step_id="bm25")
    out = op(pa.table({
        "qid": ["bees", "gothic", "immune"],
        "query": ["which insects make honey and pollinate flowers",
                  "gothic cathedrals and medieval architecture",
                  "autoimmune disease immune system"],
    }))
    first = {row["qid"]: row["title"] for row in out.to_pylist() if row["rank"] == 1}
    assert first == {"bees": "Bee", "gothic": "Gothic architecture", "immune": "Autoimmune disease"}
    bee = next(r for r in out.to_pylist() if r["qid"] == "bees" and r["rank"] == 1)
    assert bee["docno"] == "wv00790" and "honey" in bee["text"].lower()


def test_result_rows_ranks_and_step_columns():
    out = create("retrieve.corpus_bm25", {"k": 4}, step_id="b")(queries(3))
    assert out.num_rows == 12
    for column in ("qid", "query", "docno", "title", "text", "score", "rank", "score_b", "rank_b"):
        assert column in out.column_names
    assert out.schema.field("score").type == pa.float64() and out.schema.field("rank").type == pa.int32()
    for qid in SAMPLE_QUERIES:
        rows = [r for r in out.to_pylist() if r["qid"] == qid]
        assert [r["rank"] for r in rows] == [1, 2, 3, 4]
        scores = [r["score"] for r in rows]
        assert scores == sorted(scores, reverse=True) and scores[-1] > 0
        assert all(r["score_b"] == r["score"] and r["rank_b"] == r["rank"] for r in rows)


def test_query_without_matching_words_returns_no_rows_and_columns_pass_through():
    out = create("retrieve.corpus_bm25", {"k": 3})(pa.table({
        "qid": ["a", "b"], "query": ["zzqxv wqxzz", "opera"], "session": ["s1", "s2"]}))
    assert set(out.column("qid").to_pylist()) == {"b"}
    assert out.column("session").to_pylist() == ["s2"] * 3


def test_params_are_validated_cheaply():
    with pytest.raises(ParamsError) as err:
        create("retrieve.corpus_bm25", {"k": 0}, step_id="r")
    assert err.value.field == "params.k" and err.value.step == "r"
    op = create("retrieve.corpus_bm25", {"corpus": "does/not/exist.jsonl"})
    assert not op._is_set_up  # nothing is read until setup()


def test_missing_corpus_names_the_field(tmp_path):
    op = create("retrieve.corpus_bm25", {"corpus": str(tmp_path / "nope.jsonl")}, step_id="r")
    with pytest.raises(OperatorError) as err:
        op(queries(1))
    assert err.value.field == "params.corpus" and err.value.step == "r"
    assert "not found" in err.value.message


def _write_corpus(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")


def test_own_corpus_and_relative_path_from_another_directory(tmp_path, monkeypatch):
    corpus = tmp_path / "tiny.jsonl"
    _write_corpus(corpus, [
        {"_id": "d1", "title": "Cats", "text": "Cats purr and chase mice."},
        {"_id": "d2", "title": "Dogs", "text": "Dogs bark at the postman."},
        {"docno": "d3", "text": "Mice eat cheese."},
    ])
    monkeypatch.chdir(tmp_path)
    out = create("retrieve.corpus_bm25", {"corpus": "tiny.jsonl", "k": 5})(
        pa.table({"qid": ["1"], "query": ["mice"]}))
    assert out.column("docno").to_pylist()[:2] in (["d3", "d1"], ["d1", "d3"])
    assert set(out.column("docno").to_pylist()) == {"d1", "d3"}  # d2 has no query word
    # The bundled sample is found relative to the repository root from any directory.
    sample = create("retrieve.corpus_bm25", {"k": 1})(pa.table({"qid": ["1"], "query": ["honey bees"]}))
    assert sample.column("title").to_pylist() == ["Bee"]


def test_a_query_with_no_known_word_finds_no_document_of_stopwords_alone(tmp_path):
    """bm25s gives both a token-less document and a query with no known word its empty token: "zebra" found
    "To be or not to be." first, with a positive score, where the on-disk index finds nothing."""
    corpus = tmp_path / "quotes.jsonl"
    _write_corpus(corpus, [{"_id": "hamlet", "text": "To be or not to be."},
                           {"_id": "bees", "text": "Honey bees make honey."}])
    out = create("retrieve.corpus_bm25", {"corpus": str(corpus), "k": 5})(
        pa.table({"qid": ["1", "2", "3", "4"], "query": ["zebra", "the of", "!!!", "honey"]}))
    assert list(zip(out.column("qid").to_pylist(), out.column("docno").to_pylist())) == [("4", "bees")]


def test_a_word_written_with_a_combining_accent_is_the_precomposed_word(tmp_path):
    """As the index's BM25 (tests/operators/store/test_bm25.py): ``e`` + U+0301 is ``é``, in documents and queries."""
    corpus = tmp_path / "accents.jsonl"
    _write_corpus(corpus, [{"_id": "pre", "text": "caf\u00e9 latte"}, {"_id": "comb", "text": "cafe\u0301 mocha"},
                           {"_id": "plain", "text": "plain cafe"}])
    op = create("retrieve.corpus_bm25", {"corpus": str(corpus), "k": 3})
    for query in ("caf\u00e9", "cafe\u0301"):
        found = op(pa.table({"qid": ["q"], "query": [query]})).column("docno").to_pylist()
        assert sorted(found) == ["comb", "pre"], query


def test_cache_key_follows_the_corpus_content(tmp_path):
    corpus = tmp_path / "c.jsonl"
    _write_corpus(corpus, [{"_id": "d1", "text": "alpha beta"}])
    before = step_key(create("retrieve.corpus_bm25", {"corpus": str(corpus)}))
    assert step_key(create("retrieve.corpus_bm25", {"corpus": str(corpus)})) == before
    _write_corpus(corpus, [{"_id": "d1", "text": "alpha beta gamma"}])
    after = step_key(create("retrieve.corpus_bm25", {"corpus": str(corpus)}))
    assert after != before
    assert "corpus_sha256" in create("retrieve.corpus_bm25", {"corpus": str(corpus)}).cache_identity()


def test_in_a_flow_the_second_run_is_served_from_the_cache(cache):
    spec = FlowSpec.parse({"name": "bm25", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"k": 3}},
        "top": {"op": "postprocess.reduce", "params": {"k": 2}},
    }})
    first = LocalExecutor(cache=cache).run(spec, queries(3))
    second = LocalExecutor(cache=cache).run(spec, queries(3))
    assert second.steps["bm25"].hits == 3 and first.steps["bm25"].hits == 0
    assert second.table.to_pylist() == first.table.to_pylist()
    assert first.table.num_rows == 6


def test_outside_a_clone_a_missing_corpus_is_looked_for_in_the_working_directory_alone(tmp_path, monkeypatch):
    """Installed from a wheel, the folder above the package is site-packages: the default corpus was looked for
    there too, and the error said so ("looked in /work and .../site-packages"), a place no user puts a corpus (its
    ``data/`` is another package's). In a clone the repository root is still looked in, from any directory."""
    from operators.retrieve import corpus_bm25

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert corpus_bm25.resolve_corpus("data/sample/corpus.jsonl").is_file()  # this clone's sample
    site = tmp_path / "site-packages"
    (site / "data").mkdir(parents=True)  # as `contractions` installs one
    monkeypatch.setattr(corpus_bm25, "REPO_ROOT", site)  # where an installed operators/ package's parent is
    op = create("retrieve.corpus_bm25", {}, step_id="bm25")
    said = op.missing_files()
    assert said == {"params.corpus": f"corpus file not found: data/sample/corpus.jsonl (looked in {work})"}
