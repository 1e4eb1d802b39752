"""retrieve.bm25 over an on-disk index: the contract, parity with the demo ranker, filters, the shared index."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from flows.cache import step_key
from operators.errors import OperatorError
from operators.registry import create
from operators.testing import OperatorContract, sample_documents
from operators.testing import sample_queries as queries

COUNTRIES = ["FR", "DE", "JP", "US", "BR"]
REGIONS = {"FR": "Europe", "DE": "Europe", "JP": "Asia", "US": "Americas", "BR": "Americas"}


def with_metadata(docs: pa.Table) -> pa.Table:
    """Deterministic metadata per sample doc: year 1990-2019, a country and its region, a date."""
    n = docs.num_rows
    years = [1990 + i % 30 for i in range(n)]
    countries = [COUNTRIES[i % 5] for i in range(n)]
    return (docs.append_column("doc_id", docs.column("docno"))
                .append_column("year", pa.array(years, pa.int64()))
                .append_column("country", pa.array(countries))
                .append_column("region", pa.array([REGIONS[c] for c in countries]))
                .append_column("published", pa.array([dt.date(y, 1 + i % 12, 1 + i % 28)
                                                      for i, y in enumerate(years)], pa.date32())))


@pytest.fixture(scope="module")
def bm25_index(tmp_path_factory):
    from operators.store import Index, IndexSettings

    path = tmp_path_factory.mktemp("bm25") / "sample"
    index = Index.create(path, IndexSettings(dense=False))
    docs = with_metadata(sample_documents(1000))
    index.commit([index.write_shard("a", docs.slice(0, 600)), index.write_shard("b", docs.slice(600))])
    return path


class TestBM25Contract(OperatorContract):
    operator_name = "retrieve.bm25"

    @pytest.fixture(autouse=True)
    def _index(self, bm25_index):
        self.index = str(bm25_index)

    def make_operator(self, **params):
        return create("retrieve.bm25", {"index": self.index, "k": 5, **params}, step_id="bm25")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return queries(n_queries)


def test_rows_like_the_demo_ranker_and_the_same_scores(bm25_index):
    """The sharded index scores like one bm25s index over the sample (the demo ranker's setup)."""
    ours = create("retrieve.bm25", {"index": str(bm25_index), "k": 10}, step_id="b")(queries(3))
    demo = create("retrieve.corpus_bm25", {"k": 10}, step_id="d")(queries(3))
    assert ours.column("docno").to_pylist() == demo.column("docno").to_pylist()
    assert ours.column("score").to_pylist() == pytest.approx(demo.column("score").to_pylist(), rel=1e-5)
    first = {r["qid"]: r["title"] for r in ours.to_pylist() if r["rank"] == 1}
    assert first["q1"] == "Bee"
    for column in ("qid", "query", "docno", "doc_id", "title", "text", "year", "country", "published",
                   "score", "rank", "score_b", "rank_b"):
        assert column in ours.column_names
    assert ours.schema.field("rank").type == pa.int32()


def test_query_columns_pass_through_and_unmatched_queries_give_no_rows(bm25_index):
    out = create("retrieve.bm25", {"index": str(bm25_index), "k": 3})(pa.table({
        "qid": ["a", "b"], "query": ["zzqxv wqxzz", "opera"], "session": ["s1", "s2"]}))
    assert set(out.column("qid").to_pylist()) == {"b"} and out.column("session").to_pylist() == ["s2"] * 3


def test_a_query_rewrites_columns_stay_the_querys_where_a_document_has_a_column_so_named(tmp_path):
    """A document's metadata ``original_qid: "zzz"`` took the place of an expanded query's in each of its hits, so
    ``fuse.expanded_queries`` gave them to a query zzz and the question kept none (bm25_expanded over such an index
    found nothing, and rag's hits showed the document's ``original_query``). Where the queries have no such column, a
    hit keeps the document's."""
    from operators.store import Index, IndexSettings

    Index.create(tmp_path / "idx", IndexSettings(dense=False)).add(pa.table({
        "docno": ["bees#0", "ants#0"], "doc_id": ["bees", "ants"], "title": ["Bees", "Ants"],
        "text": ["honey bees make honey", "ants farm aphids for honeydew"], "original_qid": ["zzz", "zzz"],
        "original_query": ["a stored question", "a stored question"], "query_source": ["crawl", "crawl"]}))
    expanded = pa.table({"qid": ["1", "1#1"], "query": ["honey bees", "ants aphids"], "original_qid": ["1", "1"],
                         "original_query": ["honey bees", "honey bees"], "query_source": ["original", "keywords"]})
    hits = create("retrieve.bm25", {"index": str(tmp_path / "idx"), "k": 2}, step_id="bm25")(expanded)
    assert sorted(zip(hits["qid"].to_pylist(), hits["docno"].to_pylist(), hits["original_qid"].to_pylist(),
                      hits["original_query"].to_pylist(), hits["query_source"].to_pylist())) == [
        ("1", "bees#0", "1", "honey bees", "original"), ("1#1", "ants#0", "1", "honey bees", "keywords")]
    fused = create("fuse.expanded_queries", {}, step_id="fused")(hits)
    assert sorted(zip(fused["qid"].to_pylist(), fused["docno"].to_pylist())) == [("1", "ants#0"), ("1", "bees#0")]
    plain = create("retrieve.bm25", {"index": str(tmp_path / "idx"), "k": 1}, step_id="bm25")(
        pa.table({"qid": ["1"], "query": ["honey bees"]}))
    assert (plain["original_qid"].to_pylist(), plain["query_source"].to_pylist()) == (["zzz"], ["crawl"])


FILTER = {"field": "year", "eq": 2002, "country": "JP"}  # about 1 doc in 30 x 5 -> 33 of 1000


def test_pre_and_post_filters_return_only_matching_docs(bm25_index):
    query = pa.table({"qid": ["1"], "query": ["the history of the city and its people in the century"]})
    pre = create("retrieve.bm25", {"index": str(bm25_index), "k": 5, "filter": FILTER})(query)
    post = create("retrieve.bm25", {"index": str(bm25_index), "k": 5, "filter": FILTER, "filter_mode": "post",
                                    "expand_factor": 2})(query)
    for out in (pre, post):
        assert all(r["year"] == 2002 and r["country"] == "JP" for r in out.to_pylist())
        assert out.column("rank").to_pylist() == list(range(1, out.num_rows + 1))
    # pre searches the matching docs only: k results although matches are rare;
    # post only sees the top k * expand_factor of all docs
    assert pre.num_rows == 5 and post.num_rows < 5
    wide = create("retrieve.bm25", {"index": str(bm25_index), "k": 5, "filter": FILTER, "filter_mode": "post",
                                    "expand_factor": 1000})(query)
    assert wide.column("docno").to_pylist() == pre.column("docno").to_pylist()


def test_temporal_and_boolean_filters_reach_the_index(bm25_index):
    flt = {"any": [{"field": "published", "year": 1995, "month": 6}, {"region": "asia"}]}
    out = create("retrieve.bm25", {"index": str(bm25_index), "k": 50, "filter": flt})(queries(3))
    assert out.num_rows > 0
    for row in out.to_pylist():
        assert row["region"] == "Asia" or (row["published"].year, row["published"].month) == (1995, 6)


def test_errors_name_the_step_and_field(bm25_index, tmp_path):
    with pytest.raises(OperatorError) as err:
        create("retrieve.bm25", {}, step_id="r")(queries(1))
    assert err.value.field == "params.index" and err.value.step == "r"
    assert "params.index is not set (name or path of an index built by tessera ingest)" in str(err.value)
    with pytest.raises(OperatorError) as err:
        create("retrieve.bm25", {"index": str(tmp_path / "nope")}, step_id="r")(queries(1))
    assert err.value.field == "params.index" and "nope" in err.value.message
    with pytest.raises(OperatorError) as err:
        create("retrieve.bm25", {"index": str(bm25_index), "filter": {"field": "yeer", "eq": 1}}, step_id="r")(
            queries(1))
    assert err.value.field == "params.filter" and "yeer" in err.value.message and err.value.step == "r"
    with pytest.raises(OperatorError) as err:
        create("retrieve.dense", {"index": str(bm25_index)}, step_id="d")(queries(1))
    assert "without vectors" in err.value.message


def test_one_index_per_process_and_the_cache_key_follows_the_generation(tmp_path):
    from operators.store import Index, IndexSettings

    path = tmp_path / "growing"
    index = Index.create(path, IndexSettings(dense=False))
    docs = with_metadata(sample_documents(40))
    index.commit([index.write_shard("a", docs.slice(0, 20))])
    a = create("retrieve.bm25", {"index": str(path), "k": 100})
    b = create("retrieve.bm25", {"index": str(path), "k": 5})
    a.ensure_setup(), b.ensure_setup()
    assert a.index is b.index  # opened once, shared
    key, seen = step_key(a), a(queries(3)).column("docno").to_pylist()
    index.commit([index.write_shard("b", docs.slice(20))])  # another ingestion commits
    assert step_key(a) != key
    now = a(queries(3))
    assert now.num_rows > len(seen)
    new_docs = set(docs.slice(20).column("docno").to_pylist())
    assert new_docs & set(now.column("docno").to_pylist()), "the new shard is searched without a restart"


def test_a_restored_copy_that_commits_the_same_generation_is_another_cache_key(tmp_path):
    """A backup copied back keeps its generation and creation time; a delete after it commits the generation that a
    delete before the restore did, and the key (path, generation, created_at) replayed that other state's results:
    a deleted document ranked first, a live one missing."""
    import shutil

    from operators.store import Index, IndexSettings

    path, backup = tmp_path / "idx", tmp_path / "backup"
    index = Index.create(path, IndexSettings(dense=False))
    docs = with_metadata(sample_documents(10))
    index.commit([index.write_shard("a", docs)])
    shutil.copytree(path, backup)
    first, second = docs.column("doc_id").to_pylist()[:2]
    assert Index.open(path).delete(doc_ids=[first]) == 1
    deleted_first = step_key(create("retrieve.bm25", {"index": str(path)}))
    shutil.rmtree(path)
    shutil.copytree(backup, path)
    assert Index.open(path).delete(doc_ids=[second]) == 1
    assert Index.open(path).generation == 2
    assert step_key(create("retrieve.bm25", {"index": str(path)})) != deleted_first


def test_a_query_of_stopwords_alone_is_said_to_have_nothing_to_search_for(bm25_index, caplog):
    """'the of and' found nothing and read as "no results", as if the index lacked the subject."""
    op = create("retrieve.bm25", {"index": str(bm25_index), "k": 5}, step_id="words")
    with caplog.at_level("WARNING", logger="operators.retrieve.bm25"):
        out = op(pa.table({"qid": ["1", "2", "3", "4"], "query": ["the of and", "honey", "a", "zzqx unheardof"]}))
    assert out.num_rows > 0 and set(out.column("qid").to_pylist()) == {"2"}
    notes = [r for r in caplog.records if r.name == "operators.retrieve.bm25"]
    assert [r.getMessage() for r in notes] == [
        "words: BM25 found nothing for 'the of and' (and 1 more query): it has no word BM25 searches for, each one "
        "a stopword (stopwords: en) or a single character"]
    assert notes[0].note  # a note: --quiet hides it
    caplog.clear()
    with caplog.at_level("WARNING", logger="operators.retrieve.bm25"):
        op(pa.table({"qid": ["1"], "query": ["zzqx unheardof"]}))  # its words are terms, in no document
    assert not [r for r in caplog.records if r.name == "operators.retrieve.bm25"]


def test_a_query_of_emoji_alone_is_said_to_hold_no_letter_or_digit(bm25_index, caplog):
    """'🍕 ☕' was said to be stopwords or single characters, which it is not: BM25 searches words, and it has none."""
    op = create("retrieve.bm25", {"index": str(bm25_index), "k": 5}, step_id="words")
    query = "🍕 ☕ 👩\u200d👩\u200d👧!"
    with caplog.at_level("WARNING", logger="operators.retrieve.bm25"):
        assert op(pa.table({"qid": ["1"], "query": [query]})).num_rows == 0
    assert [r.getMessage() for r in caplog.records if r.name == "operators.retrieve.bm25"] == [
        f"words: BM25 found nothing for {query!r}: it has no word BM25 searches for, not a letter or digit in it "
        "(emoji, symbols and punctuation are no words)"]


def test_a_cjk_query_that_an_index_made_before_cjk_bigrams_cannot_find_says_why(tmp_path, caplog):
    """An index made under 'unicode' keeps it after the upgrade, and so do the documents added to it since: '烤鸭'
    found nothing inside '北京烤鸭是…' and read as "no results", as if the index lacked the subject."""
    from operators.store import Index, IndexSettings

    docs = pa.table({"docno": ["duck", "honey"], "doc_id": ["duck", "honey"], "title": ["", ""],
                     "text": ["北京烤鸭是中国著名的菜肴", "bees make honey"]})
    for tokens in ("unicode", "cjk_bigrams"):
        Index.create(tmp_path / tokens, IndexSettings(dense=False, tokens=tokens)).add(docs)
    op = create("retrieve.bm25", {"index": str(tmp_path / "unicode"), "k": 5}, step_id="words")
    with caplog.at_level("WARNING", logger="operators.retrieve.bm25"):
        out = op(pa.table({"qid": ["1", "2", "3"], "query": ["烤鸭", "honey", "北京烤鸭是中国著名的菜肴"]}))
    assert sorted(set(out.column("qid").to_pylist())) == ["2", "3"]  # the whole run is found, as built
    notes = [r for r in caplog.records if r.name == "operators.retrieve.bm25"]
    assert [r.getMessage() for r in notes] == [
        "words: BM25 found nothing for '烤鸭': this index cuts words by its tokens rule 'unicode' (made before "
        "'cjk_bigrams'), under which a Chinese, Japanese or Korean word is found only as a whole run between "
        "punctuation or spaces; to find words inside such text, ingest its source into a new index "
        "(docs/indices.md, BM25 shards (`tessera docs indices`))"]
    assert notes[0].note
    caplog.clear()
    op = create("retrieve.bm25", {"index": str(tmp_path / "cjk_bigrams"), "k": 5}, step_id="words")
    with caplog.at_level("WARNING", logger="operators.retrieve.bm25"):
        assert op(pa.table({"qid": ["1"], "query": ["烤鸭"]})).column("doc_id").to_pylist() == ["duck"]
        assert op(pa.table({"qid": ["1"], "query": ["寿司"]})).num_rows == 0  # not in it: nothing to explain
    assert not [r for r in caplog.records if r.name == "operators.retrieve.bm25"]
