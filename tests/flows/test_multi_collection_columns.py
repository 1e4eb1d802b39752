"""The steps ``retrieve.multi_collection`` runs on its merged rows (``postprocess``) have their input columns checked
before the flow runs, as every step of a flow has (``flows.spec_columns``): a ``rerank.tfidf`` reading a column no
collection gives failed mid-run, once every collection had been searched, naming a step of no spec (``m_post1``).
Real BM25 indices, the local executor."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.errors import SpecError
from operators.testing import sample_documents
from tests.conftest import bm25_sample_index

QUERIES = pa.table({"qid": ["1"], "query": ["music film album"]})


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return bm25_sample_index(tmp_path_factory.mktemp("multi_columns") / "index", 30)


def multi(path, *post: dict, **second) -> FlowSpec:
    """Collections a and b of the index at ``path`` (b's fields replaced by ``second``), then ``post``."""
    return FlowSpec.parse({"name": "multi", "steps": {"m": {"op": "retrieve.multi_collection", "params": {
        "collections": [{"name": "a", "index": str(path), "k": 5}, {"name": "b", "index": str(path), "k": 5,
                                                                     **second}],
        "postprocess": list(post)}}}})


DEDUP = {"op": "postprocess.dedup", "params": {"by": "doc_id"}}


@pytest.mark.parametrize("post, field, column", [
    ({"op": "rerank.tfidf", "params": {"text_column": "body"}}, "params.text_column", "body"),
    ({"op": "postprocess.filter", "params": {"filter": {"field": "year", "gt": 2000}}}, "params.filter", "year"),
])
def test_a_postprocess_step_needing_a_column_no_collection_gives_is_refused_before_the_searches(index, post, field,
                                                                                                column):
    flow = multi(index, DEDUP, post).build()
    flow.check_columns(None)  # a flow input that may hold any column could bring it (the searches pass it on)
    with pytest.raises(SpecError) as err:
        LocalExecutor().run(flow, QUERIES)
    assert (err.value.step, err.value.op, err.value.field) == ("m", post["op"], f"steps.m.params.postprocess.1.{field}")
    assert err.value.message.startswith(
        f"needs input column(s) {column}, which neither the steps before it in params.postprocess nor the searches of "
        "params.collections write, their indices do not hold and step 'm's input cannot bring (its rows may hold: "
        "chunk_index, collection, doc_id, docno, qid, query, rank, rank_m, rank_m_a, rank_m_b, score, score_m, "
        "score_m_a, score_m_b, text, title, total_chunks)"), err.value.message


def test_a_spec_file_names_the_line_of_the_postprocess_step(index, tmp_path):
    path = tmp_path / "multi.yaml"
    path.write_text(f"""name: multi
steps:
  m:
    op: retrieve.multi_collection
    params:
      collections:
        - {{name: a, index: {index}}}
      postprocess:
        - {{op: postprocess.dedup}}
        - {{op: rerank.tfidf, params: {{text_column: body}}}}
""", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        FlowSpec.load(path).build().check_columns(["qid", "query"])
    assert err.value.message.startswith(f"{path}, line 10: needs input column(s) body,"), err.value.message


@pytest.mark.parametrize("post", [
    [{"op": "rerank.tfidf", "params": {"text_column": "title"}}],  # the index holds it
    [{"op": "postprocess.filter", "params": {"filter": {"field": "collection", "eq": "a"}}}],  # the step writes it
    [{"op": "analyze.word_count", "params": {"output_column": "words"}},  # a step before it writes it
     {"op": "postprocess.filter", "params": {"filter": {"field": "words", "gt": 1}}}],
])
def test_a_column_the_collections_the_step_or_an_earlier_postprocess_step_gives_runs(index, post):
    out = LocalExecutor().run(multi(index, *post).build(), QUERIES).table
    assert set(out.column("collection").to_pylist()) <= {"a", "b"} and out.num_rows > 0


def test_a_column_of_the_flow_input_or_of_an_index_not_known_is_not_refused(index):
    tfidf_on_body = {"op": "rerank.tfidf", "params": {"text_column": "body"}}
    multi(index, tfidf_on_body).build().check_columns(["qid", "query", "body"])  # the searches pass it on
    multi(index, tfidf_on_body, index=None).build().check_columns(["qid", "query"])  # b's index is unset: unknown
    multi(index, tfidf_on_body, index=str(index.parent / "nowhere")).build().check_columns(["qid", "query"])


WORDS = {"op": "analyze.word_count", "params": {"output_column": "words"}}


def then(spec: FlowSpec, column: str) -> FlowSpec:
    """``spec`` with a step after ``m`` that reads ``column`` (``postprocess.cutoff``'s score column)."""
    return FlowSpec.parse({**spec.to_dict(), "steps": {**spec.to_dict()["steps"], "cut": {
        "op": "postprocess.cutoff", "params": {"score_column": column, "similarity_cutoff": 0}}}})


def test_the_step_declares_the_columns_its_searches_and_postprocess_steps_write(index):
    """produces() named the merged rows' columns only: a reranker's or an analysis's column was no column of it."""
    tfidf = {"op": "rerank.tfidf"}
    written = multi(index, WORDS, tfidf).build().operators["m"].produces()
    assert {"words", "score_m_post1", "rank_m_post1", "score_m_a", "rank_m_b", "collection"} <= set(written)
    assert (written["score"], written["docno"]) == ("score", "id")  # the merged rows' roles stand


def test_a_step_after_it_reading_a_column_nothing_writes_is_refused_before_the_searches(index):
    """It was taken as open (no index param to read the columns of), so such a step failed mid-run, after every
    collection had been searched and every postprocess step had run."""
    flow = then(multi(index, WORDS), "wordz").build()
    with pytest.raises(SpecError) as err:
        flow.check_columns(["qid", "query"])
    assert (err.value.step, err.value.field) == ("cut", "steps.cut.params.score_column")
    assert err.value.message.startswith("needs input column(s) wordz, which no step above it writes"), err.value.message
    assert "words" in err.value.message and "score_m_a" in err.value.message  # what it may read instead
    with pytest.raises(SpecError):
        LocalExecutor().run(flow, QUERIES)


@pytest.fixture(scope="module")
def dated_index(tmp_path_factory):
    """Documents with a ``year`` field, which only the index holds."""
    from operators.store import Index, IndexSettings

    path = tmp_path_factory.mktemp("multi_dated") / "index"
    made = Index.create(path, IndexSettings(dense=False))
    docs = sample_documents(30)
    docs = docs.append_column("doc_id", docs.column("docno")).append_column("year", pa.array([2001] * 30))
    made.commit([made.write_shard("a", docs)])
    return path


@pytest.mark.parametrize("column", ["words", "score_m_post1", "score_m_a", "year"])
def test_a_step_after_it_reading_a_postprocess_a_search_or_an_index_column_runs(dated_index, column):
    """words: analyze.word_count's; score_m_post1: rerank.tfidf's own score; score_m_a: collection a's search's;
    year: a field of the index, which every collection's search brings."""
    flow = then(multi(dated_index, WORDS, {"op": "rerank.tfidf"}), column).build()
    flow.check_columns(["qid", "query"])
    out = LocalExecutor().run(flow, QUERIES).table
    assert column in out.column_names and out.num_rows > 0


@pytest.mark.parametrize("column", ["chunk_index", "total_chunks"])
@pytest.mark.parametrize("search", ["bm25", "m"])
def test_a_step_reading_the_chunk_numbers_every_hit_has_runs(index, search, column):
    """A search of an index writes each hit's chunk_index and total_chunks (1 for a whole document) though the
    index's manifest lists no such field: a step reading them was refused, "which no step above it writes"."""
    first = {"op": "retrieve.bm25", "params": {"index": str(index)}} if search == "bm25" else \
        multi(index).to_dict()["steps"]["m"]
    flow = then(FlowSpec.parse({"name": "chunks", "steps": {search: first}}), column).build()
    flow.check_columns(["qid", "query"])
    out = LocalExecutor().run(flow, QUERIES).table
    assert column in out.column_names and out.num_rows > 0
