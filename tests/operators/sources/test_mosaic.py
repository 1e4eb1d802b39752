"""sources.mosaic against a MOSAIC-compatible server on 127.0.0.1 (tests/operators/sources/conftest.py).

The server searches real corpora with BM25: the bundled Wikipedia sample, and SciFact
from ../shared/data for the tests marked ``data``.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from operators.errors import OperatorError, ParamsError
from operators.registry import create, get_operator
from operators.sources.mosaic import MosaicError
from operators.testing import SAMPLE_CORPUS, OperatorContract, sample_queries
from tests.server_counts import settled

QUERIES = pa.table({"qid": ["q1", "q2"],
                    "query": ["which insects make honey and pollinate flowers", "opera composer"]})


def mosaic(url: str, **params):
    return create("sources.mosaic", {"url": url, "search_index": "simplewiki", "limit": 5, "backoff": 0.01,
                                     **params}, step_id="mosaic")


class TestMosaicContract(OperatorContract):
    operator_name = "sources.mosaic"

    @pytest.fixture(autouse=True)
    def _server(self, sample_mosaic):
        self.url = sample_mosaic.url()

    def make_operator(self, **params):
        return mosaic(self.url, **params)

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return sample_queries(n_queries)


def test_results_carry_mosaic_fields_full_text_and_the_service_order(sample_mosaic):
    out = mosaic(sample_mosaic.url())(QUERIES)
    q1 = [r for r in out.to_pylist() if r["qid"] == "q1"]
    expected = sample_mosaic.search("simplewiki", QUERIES["query"][0].as_py(), 5)
    assert [r["docno"] for r in q1] == [d["id"] for d in expected] and len(q1) == 5
    assert [r["rank"] for r in q1] == [1, 2, 3, 4, 5]
    for row, doc in zip(q1, expected):
        assert row["text"] == sample_mosaic.by_id[doc["id"]]["text"]  # the full text, not the snippet
        assert (row["title"], row["url"], row["snippet"], row["word_count"], row["warc_date"], row["source_index"]) \
            == (doc["title"], doc["url"], doc["textSnippet"], doc["wordCount"], doc["warcDate"], "simplewiki")
    assert "honey" in q1[0]["text"].lower()


def test_limit_is_a_prefix_of_a_larger_page_and_snippets_need_one_request(sample_mosaic):
    three = mosaic(sample_mosaic.url(), limit=3, full_text=False)(QUERIES.slice(0, 1))
    ten = mosaic(sample_mosaic.url(), limit=10, full_text=False)(QUERIES.slice(0, 1))
    assert three.column("docno").to_pylist() == ten.column("docno").to_pylist()[:3] and ten.num_rows == 10
    assert three.column("text").to_pylist() == three.column("snippet").to_pylist()


def test_an_index_that_does_not_exist_is_named_with_the_ones_that_do(sample_mosaic):
    with pytest.raises(MosaicError, match=r"index 'nope' not found \(the service has simplewiki \(1000 documents\)\)"
                       r".*404"):
        mosaic(sample_mosaic.url(), search_index="nope")(QUERIES)
    op = mosaic(sample_mosaic.url(), search_index="nope", on_error="degrade")
    assert op(QUERIES).num_rows == 0
    assert "index 'nope' not found" in op.drain_metadata()["q2"]["degraded"]["reason"]


def test_a_timeout_fails_or_degrades_after_the_retries(sample_mosaic):
    before = sample_mosaic.hits[("slow", "search")]
    started = time.perf_counter()
    with pytest.raises(MosaicError, match=r"search failed: GET .*/slow/search failed: .*timed out.*after 2 attempts"):
        mosaic(sample_mosaic.url("slow"), timeout=0.2, max_retries=1)(QUERIES.slice(0, 1))
    assert time.perf_counter() - started < 2.5
    # the server may lag the client that gave up on each attempt
    assert settled(lambda: sample_mosaic.hits[("slow", "search")] - before, 2) == 2
    op = mosaic(sample_mosaic.url("slow"), timeout=0.2, max_retries=0, on_error="degrade")
    assert op(QUERIES.slice(0, 1)).num_rows == 0
    assert "timed out" in op.drain_metadata()["q1"]["degraded"]["reason"]


def test_a_500_fails_the_step_with_the_service_message(sample_mosaic):
    with pytest.raises(OperatorError, match=r"step 'mosaic'.*500 Internal Server Error after 3 attempts.*"
                       r"search backend crashed"):
        mosaic(sample_mosaic.url("error500"), max_retries=2)(QUERIES)


def test_a_transient_503_is_retried_by_urllib3(sample_mosaic):
    out = mosaic(sample_mosaic.url("flaky"), max_retries=1)(QUERIES)
    assert out.num_rows == 10
    assert sample_mosaic.hits[("flaky", "search")] == 4  # each query: a 503, then the answer


def test_failed_full_texts_degrade_to_the_snippet(sample_mosaic):
    op = mosaic(sample_mosaic.url("fulltext500"), max_retries=0, on_error="degrade")
    out = op(QUERIES.slice(0, 1))
    assert out.num_rows == 5 and out.column("text").to_pylist() == out.column("snippet").to_pylist()
    assert "full text of 5 of 5 documents failed" in op.drain_metadata()["q1"]["degraded"]["reason"]
    with pytest.raises(MosaicError, match="full text of 5 of 5 documents failed"):
        mosaic(sample_mosaic.url("fulltext500"), max_retries=0)(QUERIES.slice(0, 1))


def test_the_password_comes_from_the_environment_and_never_shows(sample_mosaic, monkeypatch):
    monkeypatch.setenv("MOSAIC_TEST_PW", "s3cr3t-value")
    with pytest.raises(MosaicError) as caught:
        mosaic(sample_mosaic.url("slow"), timeout=0.1, max_retries=0, password_env="MOSAIC_TEST_PW")(QUERIES)
    assert "s3cr3t-value" not in str(caught.value) and "timed out" in str(caught.value)
    monkeypatch.delenv("MOSAIC_TEST_PW")
    with pytest.raises(OperatorError, match="MOSAIC_TEST_PW, which is not set"):
        mosaic(sample_mosaic.url(), password_env="MOSAIC_TEST_PW")(QUERIES)


def test_params_and_aliases():
    assert get_operator("mosaic_datasource") is get_operator("sources.mosaic")
    with pytest.raises(ParamsError, match="params.url"):
        create("sources.mosaic", {"url": "ftp://x"})
    with pytest.raises(ParamsError, match="params.url.*metadata"):  # the SSRF guard (operators.outbound)
        create("sources.mosaic", {"url": "http://169.254.169.254/latest"})
    assert create("sources.mosaic", {"limit": "50"}).params.limit == 50  # mosaicRAG sends numbers as text


@pytest.mark.data
@pytest.mark.slow  # BM25 over SciFact's 5,183 abstracts is built first
def test_every_index_answers_its_own_list_over_scifact(start_mosaic, shared_data):
    server = start_mosaic({"scifact": shared_data / "scifact" / "corpus.jsonl", "simplewiki": SAMPLE_CORPUS})
    queries = pa.table({"qid": ["v"], "query": ["vitamin D deficiency and bone fractures"]})
    out = mosaic(server.url(), search_index="all", limit=4)(queries).to_pylist()
    for index in ("scifact", "simplewiki"):
        rows = [r for r in out if r["source_index"] == index]
        assert [r["docno"] for r in rows] == [d["id"] for d in server.search(index, queries["query"][0].as_py(), 4)]
        assert all(r["text"] == server.by_id[r["docno"]]["text"] for r in rows)
    assert len(out) == 8  # four of each
    assert {r["source_index"] for r in out[:2]} == {"scifact", "simplewiki"}  # interleaved: each index's first
    assert {r["score"] for r in out[:2]} == {1.0}
    with pytest.raises(MosaicError, match=r"scifact \(5183 documents\), simplewiki \(1000 documents\)"):
        mosaic(server.url(), search_index="trec-covid")(queries)
