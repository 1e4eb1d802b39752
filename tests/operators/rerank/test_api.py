"""rerank.api against a real HTTP server on localhost whose behaviour each test picks by URL path.

The server (stdlib ThreadingHTTPServer, started once for the module) scores documents by word
overlap with the query and answers in the Cohere, Jina or TEI shape, or misbehaves on purpose:
transient 500s and 429s, a persistent 500, a hang, a 422, malformed results. It counts attempts
and records every request, so retries, splitting and headers are checked on the server side.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler

import pyarrow.compute as pc
import pytest

from operators.errors import OperatorError, ParamsError
from operators.registry import get_operator
from operators.testing import OperatorContract, local_http_server, sample_results
from tests.server_counts import settled

SECRET = "sk-test-0123456789abcdef"


def overlap_score(query: str, text: str) -> float:
    """The server's relevance: shared words, with shorter texts first among equals."""
    words = re.findall(r"\w+", text.lower())
    return len(set(re.findall(r"\w+", query.lower())) & set(words)) + 1.0 / (1 + len(words))


class ScriptedRerankServer:
    """State of the scripted server: what it received, and how often."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()  # frees handlers that hang
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.requests: dict[str, list[dict]] = defaultdict(list)
            self.attempts: Counter = Counter()
            self.in_flight = 0
            self.max_in_flight = 0
            self.slow_s = 0.3  # how long the ``slow`` scenario holds each request

    def url(self, scenario: str) -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}/rerank"

    def bodies(self, scenario: str) -> list[dict]:
        return [r["body"] for r in self.requests[scenario]]


def _ranked(body: dict) -> list[tuple[int, float]]:
    documents = body.get("documents", body.get("texts"))
    scored = [(i, overlap_score(body["query"], d)) for i, d in enumerate(documents)]
    return sorted(scored, key=lambda pair: -pair[1])[: body.get("top_n") or len(documents)]


def _cohere(body: dict) -> dict:
    return {"id": "r1", "results": [{"index": i, "relevance_score": s} for i, s in _ranked(body)],
            "meta": {"billed_units": {"search_units": 1}}}


def _handler(state: ScriptedRerankServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # keep pytest output clean
            pass

        def _leave(self) -> None:
            """No longer in flight: called before the answer goes out, so a client that sends its next
            request as soon as it reads this answer never sees two in flight."""
            if getattr(self, "_counted", False):
                self._counted = False
                with state.lock:
                    state.in_flight -= 1

        def _answer(self, status: int, payload, headers: dict | None = None) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self._leave()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # noqa: N802  (http.server's naming)
            scenario = self.path.strip("/").split("/")[0]
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.requests[scenario].append({"body": body, "headers": dict(self.headers)})
                state.attempts[(scenario, body.get("query"))] += 1
                attempt = state.attempts[(scenario, body.get("query"))]
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
                self._counted = True
            try:
                self._respond(scenario, body, attempt)
            finally:
                self._leave()

        def _respond(self, scenario: str, body: dict, attempt: int) -> None:
            if scenario == "cohere":
                self._answer(200, _cohere(body))
            elif scenario == "jina":
                self._answer(200, {"model": body.get("model"), "usage": {"total_tokens": 10}, "results": [
                    {"index": i, "document": {"text": body["documents"][i]}, "relevance_score": s}
                    for i, s in _ranked(body)]})
            elif scenario == "tei":
                if "texts" not in body or "documents" in body:
                    self._answer(422, {"error": "TEI expects 'texts'", "error_type": "Validation"})
                else:
                    self._answer(200, [{"index": i, "score": s} for i, s in _ranked(body)])
            elif scenario == "flaky":  # two failures per query, then an answer
                if attempt <= 2:
                    self._answer(500, {"message": "temporary failure"})
                else:
                    self._answer(200, _cohere(body))
            elif scenario == "ratelimited":
                if attempt == 1:
                    self._answer(429, {"message": "too many requests"}, {"Retry-After": "0"})
                else:
                    self._answer(200, _cohere(body))
            elif scenario == "down":
                self._answer(500, {"message": "internal failure: the GPU fell over"})
            elif scenario == "hang":
                state.release.wait(10)  # the client gives up long before
            elif scenario == "unprocessable":
                self._answer(422, {"message": f"invalid request: model '{body.get('model')}' not found"})
            elif scenario == "out_of_range":
                results = _cohere(body)
                results["results"][0]["index"] = len(body["documents"])
                self._answer(200, results)
            elif scenario == "duplicate":
                results = _cohere(body)
                results["results"][-1]["index"] = results["results"][0]["index"]
                self._answer(200, results)
            elif scenario == "nonnumeric":
                results = _cohere(body)
                results["results"][1]["relevance_score"] = "high"
                self._answer(200, results)
            elif scenario == "fewer":  # ignores top_n and sends only the best one
                self._answer(200, {"results": _cohere(body)["results"][:1]})
            elif scenario == "noresults":
                self._answer(200, {"id": "r1", "meta": {}})
            elif scenario == "notjson":
                self._answer(200, "<html>maintenance</html>")
            elif scenario.startswith("split-"):  # refuses more documents than its limit
                limit = int(scenario.split("-")[1])
                if len(body["documents"]) > limit:
                    self._answer(413, {"message": f"at most {limit} documents"})
                else:
                    self._answer(200, _cohere(body))
            elif scenario == "slow":
                time.sleep(state.slow_s)
                self._answer(200, _cohere(body))
            else:
                self._answer(404, {"message": f"no scenario {scenario}"})

    return Handler


@pytest.fixture(scope="module")
def server():
    state = ScriptedRerankServer()
    with local_http_server(_handler(state)) as url:
        state.port = int(url.rsplit(":", 1)[1])
        yield state
        state.release.set()  # free the handlers that hang before the server waits for them


@pytest.fixture
def rerank_server(server):
    server.reset()
    return server


def make(url: str, **params):
    return get_operator("rerank.api")({"url": url, "backoff": 0.02, "timeout": 5, **params}, step_id="api")


def assert_reranked_by_server(table, out, step="api"):
    """Every row kept, each row's score is the server's score of its own text, ranks follow scores."""
    assert out.num_rows == table.num_rows
    for qid in pc.unique(table["qid"]).to_pylist():
        rows = out.filter(pc.equal(out["qid"], qid)).to_pylist()
        before = table.filter(pc.equal(table["qid"], qid))
        assert sorted(r["docno"] for r in rows) == sorted(before["docno"].to_pylist())
        for row in rows:
            expected = overlap_score(row["query"], f"{row['title']}\n{row['text']}")
            assert row[f"score_{step}"] == pytest.approx(expected), row["docno"]
        expected_order = sorted(rows, key=lambda r: (-r[f"score_{step}"], r["docno"]))
        assert [r["docno"] for r in rows] == [r["docno"] for r in expected_order]
        assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))


class TestApiRerankContract(OperatorContract):
    operator_name = "rerank.api"

    @pytest.fixture(autouse=True)
    def _url(self, rerank_server):
        self.url = rerank_server.url("cohere")

    def make_operator(self, **params):
        return get_operator("rerank.api")({"url": self.url, **params})


@pytest.mark.parametrize("fmt", ["cohere", "jina", "tei"])
def test_each_format_reranks_by_the_service_scores(rerank_server, fmt):
    table = sample_results(n_queries=3, per_query=6)
    op = make(rerank_server.url(fmt), format=fmt, model=None if fmt == "tei" else "rerank-test")
    out = op(table)
    assert_reranked_by_server(table, out)
    assert op.drain_metadata() == {}
    bodies = rerank_server.bodies(fmt)
    assert len(bodies) == 3
    if fmt == "tei":
        assert set(bodies[0]) >= {"query", "texts", "raw_scores"} and "documents" not in bodies[0]
    else:
        assert bodies[0]["model"] == "rerank-test" and bodies[0]["top_n"] == len(bodies[0]["documents"]) == 6
    # The reranked order differs from the incoming one somewhere (the check above is not vacuous).
    assert out["docno"].to_pylist() != table["docno"].to_pylist()


def test_only_the_top_n_are_sent_and_the_rest_stay_below(rerank_server):
    table = sample_results(n_queries=1, per_query=8)
    out = make(rerank_server.url("cohere"), n=5)(table)
    assert [len(b["documents"]) for b in rerank_server.bodies("cohere")] == [5]
    assert out["docno"].to_pylist()[5:] == table["docno"].to_pylist()[5:]
    assert out["score_api"].null_count == 3


def test_transient_500s_are_retried(rerank_server):
    table = sample_results(n_queries=2, per_query=4)
    op = make(rerank_server.url("flaky"), max_retries=3)
    out = op(table)
    assert_reranked_by_server(table, out)
    assert op.drain_metadata() == {}
    assert sorted(rerank_server.attempts.values()) == [3, 3]  # two 500s then the answer, per query


def test_429_is_retried(rerank_server):
    out = make(rerank_server.url("ratelimited"), max_retries=1)(sample_results(n_queries=1, per_query=4))
    assert out["score_api"].null_count == 0
    assert list(rerank_server.attempts.values()) == [2]


def test_persistent_500_keeps_the_first_stage_ranking_and_marks_degraded(rerank_server, caplog):
    table = sample_results(n_queries=2, per_query=4)
    op = make(rerank_server.url("down"), max_retries=2, api_key=SECRET)
    with caplog.at_level(logging.DEBUG):
        out = op(table)
    assert out["docno"].to_pylist() == table["docno"].to_pylist()
    assert out["score"].to_pylist() == table["score"].to_pylist()
    assert out["score_api"].null_count == out.num_rows
    assert out["rank_api"].to_pylist() == table["rank"].to_pylist()
    metadata = op.drain_metadata()
    assert set(metadata) == {"q1", "q2"}
    reason = metadata["q1"]["degraded"]["reason"]
    assert metadata["q1"]["degraded"]["step"] == "api"
    assert "500" in reason and "after 3 attempts" in reason and "the GPU fell over" in reason
    assert sorted(rerank_server.attempts.values()) == [3, 3]
    # The key went to the server but nowhere else.
    assert rerank_server.requests["down"][0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in reason and SECRET not in repr(op)
    assert not [r for r in caplog.records if SECRET in r.getMessage()]


def test_a_hang_times_out_quickly_and_degrades(rerank_server):
    table = sample_results(n_queries=1, per_query=4)
    op = make(rerank_server.url("hang"), timeout=0.3, max_retries=1)
    started = time.monotonic()
    out = op(table)
    elapsed = time.monotonic() - started
    assert elapsed < 3, f"a 0.3 s timeout with one retry took {elapsed:.1f} s"
    assert out["docno"].to_pylist() == table["docno"].to_pylist()
    reason = op.drain_metadata()["q1"]["degraded"]["reason"]
    assert "timed out" in reason.lower()
    assert settled(lambda: sum(rerank_server.attempts.values()), 2) == 2  # the server may lag the client that left
    assert list(rerank_server.attempts.values()) == [2]


def test_422_is_not_retried_and_the_reason_carries_the_server_message(rerank_server):
    op = make(rerank_server.url("unprocessable"), model="no-such-model", max_retries=3)
    op(sample_results(n_queries=1, per_query=3))
    reason = op.drain_metadata()["q1"]["degraded"]["reason"]
    assert "422" in reason and "model 'no-such-model' not found" in reason
    assert list(rerank_server.attempts.values()) == [1]


def test_connection_refused_degrades(rerank_server):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    op = make(f"http://127.0.0.1:{port}/rerank", max_retries=1)
    out = op(sample_results(n_queries=1, per_query=3))
    assert out.num_rows == 3
    assert "refused" in op.drain_metadata()["q1"]["degraded"]["reason"].lower()


@pytest.mark.parametrize("scenario, message", [
    ("out_of_range", "index 3 is out of range for 3 documents"),
    ("duplicate", "appears more than once"),
    ("nonnumeric", "no finite numeric"),
    ("fewer", "scored 1 of 3 documents"),
    ("noresults", "no list of results"),
    ("notjson", "not JSON"),
])
def test_malformed_answers_degrade_the_query(rerank_server, scenario, message):
    table = sample_results(n_queries=1, per_query=3)
    op = make(rerank_server.url(scenario))
    out = op(table)
    assert out["docno"].to_pylist() == table["docno"].to_pylist()
    assert out["score_api"].null_count == 3
    assert message in op.drain_metadata()["q1"]["degraded"]["reason"]


def test_on_error_error_fails_the_step(rerank_server):
    op = make(rerank_server.url("down"), max_retries=0, on_error="error")
    with pytest.raises(OperatorError, match="q1.*500") as info:
        op(sample_results(n_queries=1, per_query=3))
    assert info.value.step == "api" and "step 'api'" in str(info.value)


def test_requests_are_split_and_merged(rerank_server):
    table = sample_results(n_queries=3, per_query=5)
    out = make(rerank_server.url("split-2"), max_documents_per_request=2)(table)
    bodies = rerank_server.bodies("split-2")
    assert [len(b["documents"]) for b in bodies if b["query"] == bodies[0]["query"]] == [2, 2, 1]
    assert len(bodies) == 9 and all(b["top_n"] == len(b["documents"]) for b in bodies)
    assert_reranked_by_server(table, out)
    whole = make(rerank_server.url("cohere"))(table)  # one request per query: the same ranking
    assert out.select(["qid", "docno", "score", "rank"]).equals(whole.select(["qid", "docno", "score", "rank"]))


def test_without_splitting_the_limited_server_refuses(rerank_server):
    op = make(rerank_server.url("split-2"))
    op(sample_results(n_queries=1, per_query=3))
    assert "413" in op.drain_metadata()["q1"]["degraded"]["reason"]


def test_documents_are_cut_to_max_chars(rerank_server):
    table = sample_results(n_queries=1, per_query=3)
    make(rerank_server.url("cohere"), max_chars_per_document=40, title_column=None)(table)
    sent = rerank_server.bodies("cohere")[0]["documents"]
    assert sent == [t[:40] for t in table["text"].to_pylist()]


def test_headers_key_from_env_and_user_headers(rerank_server, monkeypatch):
    table = sample_results(n_queries=1, per_query=2)
    make(rerank_server.url("cohere"))(table)
    plain = rerank_server.requests["cohere"][-1]["headers"]
    assert "Authorization" not in plain and not any(k.lower().startswith("x-openwebui") for k in plain)

    monkeypatch.setenv("TESSERA_TEST_RERANK_KEY", SECRET)
    make(rerank_server.url("cohere"), api_key_env="TESSERA_TEST_RERANK_KEY",
         user_headers={"X-OpenWebUI-User-Id": "u-42", "X-OpenWebUI-User-Name": "Ada"})(table)
    sent = rerank_server.requests["cohere"][-1]["headers"]
    assert sent["Authorization"] == f"Bearer {SECRET}"
    assert sent["X-OpenWebUI-User-Id"] == "u-42" and sent["X-OpenWebUI-User-Name"] == "Ada"

    # a spec of one's own (Python, the CLI) may carry a key in a header; only the service refuses that
    make(rerank_server.url("cohere"), user_headers={"X-Api-Key": SECRET})(table)
    assert rerank_server.requests["cohere"][-1]["headers"]["X-Api-Key"] == SECRET


def test_missing_key_variable_fails_naming_it(rerank_server, monkeypatch):
    monkeypatch.delenv("TESSERA_TEST_MISSING_KEY", raising=False)
    op = make(rerank_server.url("cohere"), api_key_env="TESSERA_TEST_MISSING_KEY")
    with pytest.raises(OperatorError, match="TESSERA_TEST_MISSING_KEY"):
        op(sample_results(n_queries=1, per_query=2))
    assert not rerank_server.requests


def test_queries_are_sent_concurrently(rerank_server):
    table = sample_results(n_queries=3, per_query=3)
    out = make(rerank_server.url("slow"), concurrent_requests=3)(table)
    assert_reranked_by_server(table, out)
    assert rerank_server.max_in_flight >= 2
    rerank_server.reset()
    rerank_server.slow_s = 0.1  # requests sent at once would overlap for this long too
    make(rerank_server.url("slow"), concurrent_requests=1)(table)
    assert rerank_server.max_in_flight == 1


@pytest.mark.parametrize("concurrent", [1, 3])
def test_a_cancelled_flow_stops_between_requests(rerank_server, concurrent):
    """A cancel (a client that went away, /task/cancel) stops the step at its next request, not after all."""
    from operators.errors import FlowCancelled
    from operators.interrupt import interruptible

    def check() -> None:
        if len(rerank_server.bodies("slow")) >= 3:
            raise FlowCancelled("the client went away")

    rerank_server.slow_s = 0.1  # held while the next ones wait for a free slot: the step looks at the cancel then
    op = make(rerank_server.url("slow"), max_documents_per_request=1, concurrent_requests=concurrent)
    with pytest.raises(FlowCancelled, match="went away"), interruptible(check):
        op(sample_results(n_queries=3, per_query=10))
    assert 3 <= len(rerank_server.bodies("slow")) <= 2 + concurrent  # those in flight when it was cancelled


@pytest.mark.parametrize("params, field", [
    ({"url": "ftp://example.org/rerank"}, "params.url"),
    ({"url": "http://x/rerank", "api_key": "a", "api_key_env": "B"}, "params.api_key_env"),
    ({"url": "http://x/rerank", "user_headers": {"authorization": "Bearer x"}}, "params.user_headers"),
    ({"url": "http://x/rerank", "format": "openai"}, "params.format"),
    ({"url": "http://x/rerank", "max_documents_per_request": 0}, "params.max_documents_per_request"),
    ({}, "params.url"),
])
def test_bad_params_name_the_field(params, field):
    with pytest.raises(ParamsError) as info:
        get_operator("rerank.api")(params)
    assert info.value.field == field


def test_is_not_cacheable():
    assert get_operator("rerank.api").cacheable is False
