"""Errors of the HTTP API: OpenAI's shape everywhere, bad text refused before any batch, one bad input never
failing its batch neighbours, and no traceback reaching a client."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from tests.text_checks import TRACEBACK

SURROGATE = "\ud83d"  # half of an emoji: JSON can carry it ("\\ud83d"), UTF-8 and tokenizers cannot


def post(base: str, path: str, body: dict | str) -> requests.Response:
    if isinstance(body, str):
        return requests.post(base + path, data=body, headers={"content-type": "application/json"}, timeout=120)
    return requests.post(base + path, json=body, timeout=120)  # ensure_ascii: a surrogate travels as \\ud83d


def assert_openai_error(response: requests.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert TRACEBACK not in response.text and "File \"" not in response.text
    return body["error"]


# -- without Serve ---------------------------------------------------------------------


@pytest.mark.parametrize("model, body, field", [
    ("EmbeddingsRequest", {"model": "m", "input": SURROGATE}, "input"),
    ("EmbeddingsRequest", {"model": "m", "input": ["fine", "a" + SURROGATE]}, "input"),
    ("EmbeddingsRequest", {"model": SURROGATE, "input": "x"}, "model"),
    ("RerankRequest", {"model": "m", "query": SURROGATE, "documents": ["d"]}, "query"),
    ("RerankRequest", {"model": "m", "query": "q", "documents": ["d", SURROGATE]}, "documents"),
    ("RerankRequest", {"model": "m", "query": "q", "documents": [{"text": SURROGATE}]}, "documents"),
    # a field that is only echoed back (return_documents): its encoding in the response was a 500
    ("RerankRequest", {"model": "m", "query": "q", "documents": [{"text": "a", "meta": {"k": ["b", SURROGATE]}}],
                       "return_documents": True}, "documents"),
    ("RerankV2Request", {"model": "m", "query": "q", "documents": [SURROGATE]}, "documents"),
])
def test_a_lone_surrogate_is_refused_naming_the_field(model, body, field):
    from pydantic import ValidationError

    from serve import schemas

    with pytest.raises(ValidationError) as err:
        getattr(schemas, model).model_validate(body)
    (problem,) = err.value.errors()
    assert problem["loc"][0] == field and "lone surrogate" in problem["msg"]


@pytest.mark.parametrize("model, body, field, says", [
    ("schemas.RerankRequest", {"model": "m", "query": "\x00", "documents": ["d"]}, "query", "query is blank"),
    ("schemas.RerankV2Request", {"model": "m", "query": "\u200b", "documents": ["d"]}, "query", "query is blank"),
    ("schemas.EmbeddingsRequest", {"model": "m", "input": ["fine", "\u200b\x00"]}, "input", "text 1 is empty"),
    ("cohere_embed.CohereEmbedRequest", {"model": "m", "input_type": "search_query", "texts": ["\ufeff"]}, "texts",
     "text 0 is empty"),
    ("cohere_embed.CohereEmbedRequest", {"model": "m", "input_type": "search_query",
                                         "inputs": [{"content": [{"type": "text", "text": "\x00"}]}]}, "inputs",
     "input 0 is empty"),
])
def test_a_query_or_text_of_invisible_characters_alone_is_blank_as_a_searchs(model, body, field, says):
    """``str.strip`` keeps a NUL, a zero-width space and a byte-order mark: /v1/rerank ranked the documents by such a
    query, and the embeddings routes embedded such a text (200s), where /v1/search refuses the same query as blank."""
    import importlib

    from pydantic import ValidationError

    module, name = model.rsplit(".", 1)
    with pytest.raises(ValidationError) as err:
        getattr(importlib.import_module(f"serve.{module}"), name).model_validate(body)
    (problem,) = err.value.errors()
    assert problem["loc"][0] == field and says in problem["msg"], problem


@pytest.mark.parametrize("document, field, says", [
    ({"id": "   ", "text": "x"}, "id", "the id is blank"),
    ({"id": "\t", "text": "x"}, "id", "the id is blank"),
    ({"id": "\u200b", "text": "x"}, "id", "the id is blank"),
    ({"id": "a", "text": " \n "}, "text", "the text is blank and there is no title"),
    ({"id": "a", "text": "\u200b\u200b\x00"}, "text", "the text is blank and there is no title"),
    # accepted, then never to be opened: GET .../documents/.. is the index's own path once the URL is resolved
    ({"id": ".", "text": "x"}, "id", "the id '.' cannot be read back"),
    ({"id": "..", "text": "x"}, "id", "the id '..' cannot be read back"),
])
def test_an_uploaded_document_with_a_blank_id_or_nothing_to_index_is_refused_naming_the_field(document, field, says):
    """A blank id was accepted, then stored under a content id the client never sent (and a second upload of the
    same body failed on that id); a blank text without a title was accepted and left out by ingestion."""
    from pydantic import ValidationError

    from serve.indices.documents import DocumentsRequest

    with pytest.raises(ValidationError) as err:
        DocumentsRequest.model_validate({"documents": [{"id": "fine", "text": "fine"}, document]})
    (problem,) = err.value.errors()
    assert problem["loc"] == ("documents", 1, field) and says in problem["msg"], problem
    kept = DocumentsRequest.model_validate({"documents": [{"id": " a b ", "title": "A title alone", "text": " "}]})
    assert kept.documents[0].id == " a b "  # an id with spaces is an id; a title alone is a document
    assert DocumentsRequest.model_validate({"documents": [{"id": "...", "text": "x"}]}).documents[0].id == "..."


def test_metadata_names_say_the_rule_they_break_and_a_null_value_is_no_field():
    """``ключ`` is "a letter, then letters", as the message said, and was refused: the rule is ASCII's. A null value
    was four errors of the value union (str, int, float, bool); it is a field the document does not have."""
    from pydantic import ValidationError

    from serve.indices.documents import DocumentsRequest

    with pytest.raises(ValidationError) as err:
        DocumentsRequest.model_validate({"documents": [{"id": "a", "text": "x", "metadata": {"ключ": 1}}]})
    (problem,) = err.value.errors()
    assert "metadata key 'ключ' is not a column name this index can take (an ASCII letter, then ASCII letters" \
           in problem["msg"], problem
    kept = DocumentsRequest.model_validate({"documents": [{"id": "a", "text": "x",
                                                           "metadata": {"tag": None, "year": 1999}}]})
    assert kept.documents[0].metadata == {"year": 1999}


@pytest.mark.parametrize("model, body, field", [
    ("schemas.EmbeddingsRequest", {"model": "m", "input": "x", "dimensions": "384"}, "dimensions"),
    ("schemas.RerankRequest", {"model": "m", "query": "q", "documents": ["d"], "top_n": "1"}, "top_n"),
    ("schemas.RerankRequest", {"model": "m", "query": "q", "documents": ["d"], "return_documents": "yes"},
     "return_documents"),
    ("schemas.RerankV2Request", {"model": "m", "query": "q", "documents": ["d"], "max_tokens_per_doc": "9"},
     "max_tokens_per_doc"),
    ("schemas.RerankV2Request", {"model": "m", "query": "q", "documents": ["d"], "top_n": 2.0}, "top_n"),
    ("cohere_embed.CohereEmbedRequest", {"model": "m", "input_type": "search_query", "texts": ["x"],
                                         "output_dimension": "384"}, "output_dimension"),
    ("cohere_embed.CohereEmbedRequest", {"model": "m", "input_type": "search_query", "texts": []}, "texts"),
    ("cohere_embed.CohereEmbedRequest", {"model": "m", "input_type": "search_query", "inputs": []}, "inputs"),
    ("chat.chat.StreamOptions", {"include_usage": "yes"}, "include_usage"),
    # an index's two flags: "yes" replaced a stored document, or made a private index public
    ("indices.documents.DocumentsRequest", {"documents": [{"id": "a", "text": "b"}], "replace": "yes"}, "replace"),
    ("indices.documents.ShareRequest", {"shared": "yes"}, "shared"),
    ("indices.documents.ShareRequest", {"shared": 1}, "shared"),
])
def test_a_value_of_another_json_type_or_no_texts_is_refused_naming_the_field(model, body, field):
    """Read leniently before (``top_n: "1"`` as 1, ``"yes"`` as true), as the chat bodies' were; ``texts: []`` on
    /v2/embed was a 200 with no embeddings, where /v1/embed and /v1/embeddings refuse it."""
    import importlib

    from pydantic import ValidationError

    module, name = model.rsplit(".", 1)
    with pytest.raises(ValidationError) as err:
        getattr(importlib.import_module(f"serve.{module}"), name).model_validate_json(json.dumps(body))
    (problem,) = err.value.errors()
    assert problem["loc"][0] == field, problem


def app_that_fails():
    """A bare FastAPI app with the API's error handling, and a route that fails unexpectedly."""
    from fastapi import Body, FastAPI

    from serve.http import error_handlers

    app = FastAPI()
    error_handlers.install(app)

    @app.get("/boom")
    async def boom():
        raise RuntimeError("secret detail at /srv/replica/pid 4242")

    @app.post("/echo")
    async def echo(body: dict = Body(...)):
        return body

    return app


@pytest.fixture
def guarded_app():
    from fastapi.testclient import TestClient

    return TestClient(app_that_fails(), raise_server_exceptions=False)


def test_an_unexpected_exception_is_a_short_500_with_the_request_id_and_details_only_in_the_log(guarded_app,
                                                                                                  caplog):
    with caplog.at_level(logging.ERROR, logger="tessera.serve"):
        response = guarded_app.get("/boom", headers={"x-request-id": "req-123"})
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "internal_error"
    assert "req-123" in error["message"] and "secret" not in response.text and len(response.text) < 300
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "req-123" in logged
    assert any(r.exc_info and "secret detail" in str(r.exc_info[1]) for r in caplog.records)


def test_a_streamed_answer_whose_request_serve_cancels_ends_without_an_exception():
    """Serve's ``receive`` raises ``TaskCancelledError`` once the client has gone; raised through a streamed
    response's handler, it ended the call with an exception that Serve's replica never retrieves: a traceback in the
    replica's log ("Task exception was never retrieved") for every few clients that left a stream (on a running
    ``tessera serve``: 8 in 50 streams left after their first or second event, none since). The API's middlewares
    read it as the ``http.disconnect`` it is. A real FastAPI app with them, a real streaming route, Ray's class."""
    import asyncio

    from fastapi.responses import StreamingResponse
    from ray.exceptions import TaskCancelledError

    app = app_that_fails()
    sent_events = []

    @app.get("/stream")
    async def stream():
        async def events():
            for i in range(1000):
                sent_events.append(i)
                yield f"data: {i}\n\n"
                await asyncio.sleep(0.01)

        return StreamingResponse(events(), media_type="text/event-stream")

    async def call() -> list[dict]:
        received, sent = 0, []

        async def receive():
            nonlocal received
            received += 1
            if received == 1:
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.sleep(0.05)  # the client leaves while the answer streams
            raise TaskCancelledError()

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
                 "path": "/stream", "raw_path": b"/stream", "query_string": b"", "root_path": "",
                 "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
        await app(scope, receive, send)  # before: raised TaskCancelledError
        return sent

    sent = asyncio.run(call())
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    assert 0 < len(sent_events) < 1000  # the stream began and stopped when the client left


def test_a_body_json_cannot_read_is_a_422_naming_the_body(guarded_app):
    assert guarded_app.post("/echo", json={"a": 1}).json() == {"a": 1}
    for content in (b'{"query": "\xff\xfe"}', b"[" * 100_000 + b"]" * 100_000):  # not UTF-8; too deep for json
        response = guarded_app.post("/echo", content=content, headers={"Content-Type": "application/json"})
        assert response.status_code == 422, response.text
        assert response.json()["error"] == {
            "message": "body: not JSON that can be read (it is not UTF-8, or is nested too deeply)",
            "type": "invalid_request_error", "param": "body", "code": "invalid_body"}


def test_a_body_with_an_integer_python_will_not_read_says_so():
    """Python reads an integer of at most 4,300 digits (``sys.get_int_max_str_digits``): such a body was said to be
    "not UTF-8, or nested too deeply", which it was not."""
    from fastapi.testclient import TestClient

    client = TestClient(app_that_fails(), raise_server_exceptions=False)
    response = client.post("/echo", content=b'{"top_k": ' + b"9" * 5000 + b"}",
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("body", "invalid_body"), error
    assert error["message"] == ("body: not JSON that can be read: it holds an integer of more than 4,300 digits; "
                                "send a number that fits the field, or the value as a string"), error
    fits = client.post("/echo", content=b'{"top_k": ' + b"9" * 4300 + b"}",
                       headers={"Content-Type": "application/json"})
    assert fits.status_code == 200 and fits.json()["top_k"] == int("9" * 4300)


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain; charset=utf-8"])
def test_a_json_body_sent_as_another_content_type_is_a_422_saying_so(guarded_app, content_type):
    """``curl -d '{...}'`` without ``-H 'Content-Type: application/json'``: FastAPI does not read the body as JSON, and
    the 422 said "Input should be a valid dictionary" of a valid object."""
    response = guarded_app.post("/echo", content=b'{"a": 1}', headers={"Content-Type": content_type})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["param"] == "body" and "Content-Type: application/json" in error["message"], error
    assert f"'{content_type.split(';')[0]}'" in error["message"], error
    array = guarded_app.post("/echo", content=b"[1]", headers={"Content-Type": "application/json"}).json()["error"]
    assert "Content-Type" not in array["message"] and "a JSON object, not an array" in array["message"], array


def test_a_model_failure_names_the_model_and_request_id_not_the_traceback(caplog):
    from serve.http.errors import server_error

    err = ValueError("Traceback (most recent call last):\n  File \"/srv/x.py\", line 1 ... pid=4242")
    with caplog.at_level(logging.ERROR, logger="tessera.serve"):
        failure = server_error("model 'm' (deployment 'm')", err, code="model_error")
    assert failure.status == 500 and "model 'm'" in failure.message and "request id" in failure.message
    assert TRACEBACK not in failure.message and "pid" not in failure.message
    assert caplog.records and caplog.records[0].exc_info[1] is err


# -- over HTTP ---------------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.parametrize("path, body, field", [
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": SURROGATE}, "input"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": ["fine", SURROGATE]}, "input"),
    ("/v1/embeddings", {"model": SURROGATE, "input": "x"}, "model"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": "x", SURROGATE: 1}, "body"),  # no field to name
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": SURROGATE, "documents": ["d"]}, "query"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": "q", "documents": ["d", SURROGATE]}, "documents"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": "q", "documents": [{"text": SURROGATE}]},
     "documents"),
    ("/v2/rerank", {"model": "tessera-cross-encoder", "query": "q", "documents": [SURROGATE]}, "documents.0"),
])
def test_a_lone_surrogate_is_a_422_naming_the_field(serve_app, path, body, field):
    error = assert_openai_error(post(serve_app, path, body), 422)
    assert error["param"] == field and field in error["message"]


@pytest.mark.ray
def test_bad_requests_among_good_ones_fail_alone(serve_app):
    from operators import create

    texts = [f"good text number {i}" for i in range(6)]
    bodies = [{"model": "all-MiniLM-L6-v2", "input": [t]} for t in texts]
    bodies[2:2] = [{"model": "all-MiniLM-L6-v2", "input": ["bad " + SURROGATE]}]
    bodies[5:5] = [{"model": "all-MiniLM-L6-v2", "input": [SURROGATE]}]
    with ThreadPoolExecutor(len(bodies)) as pool:
        responses = list(pool.map(lambda b: post(serve_app, "/v1/embeddings", b), bodies))
    good = [r for b, r in zip(bodies, responses) if SURROGATE not in b["input"][0]]
    bad = [r for b, r in zip(bodies, responses) if SURROGATE in b["input"][0]]
    assert [r.status_code for r in bad] == [422, 422]
    assert [r.status_code for r in good] == [200] * len(texts), [r.text[:200] for r in good]
    embedder = create("embed.sentence_transformer", {})
    served = np.array([r.json()["data"][0]["embedding"] for r in good], dtype=np.float32)
    np.testing.assert_allclose(served, embedder.encode(texts), atol=1e-5)


@pytest.mark.ray
@pytest.mark.parametrize("deployment", ["all-MiniLM-L6-v2", "tessera-cross-encoder", "tessera-colbert"])
def test_a_deployment_answers_the_rest_of_a_batch_where_one_request_fails(serve_app, deployment):
    """Past the ingress's validation (a flow's placement, a handle): the failing request raises, its batch
    neighbours get their answers."""
    from ray import serve

    handle = serve.get_deployment_handle(deployment, app_name="tessera")
    texts = [f"candidate text {i}" for i in range(8)]
    texts[3] = "bad " + SURROGATE
    before = handle.info.remote().result()["batch_sizes"]
    if deployment == "all-MiniLM-L6-v2":
        calls = [handle.embed.remote([t]) for t in texts]
    else:
        calls = [handle.score.remote("a query", [t]) for t in texts]
    outcomes = []
    for call in calls:
        try:
            outcomes.append(call.result(timeout_s=120))
        except Exception as err:  # noqa: BLE001
            outcomes.append(err)
    failed = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, Exception)]
    after = handle.info.remote().result()["batch_sizes"]
    assert max(after[len(before):]) > 1, "the requests were not batched together"
    assert failed == [3], [str(outcomes[i])[:300] for i in failed]


@pytest.mark.ray
def test_a_model_failure_over_a_handle_becomes_a_short_500(serve_app):
    """The ingress's own path from a failing deployment call (a real RayTaskError) to the client's error."""
    from ray import serve

    from serve.api import ModelAPI
    from serve.http.errors import ApiError
    from serve.schemas import ModelCard
    import asyncio

    handle = serve.get_deployment_handle("all-MiniLM-L6-v2", app_name="tessera")
    card = ModelCard(id="all-MiniLM-L6-v2", type="embedding", operator="embed.sentence_transformer",
                     deployment="all-MiniLM-L6-v2", status="ready")

    async def call():
        return await ModelAPI.func_or_class._call(handle.embed.remote([SURROGATE]), card)

    with pytest.raises(ApiError) as err:
        asyncio.run(call())
    assert err.value.status == 500 and err.value.code == "model_error"
    assert "all-MiniLM-L6-v2" in err.value.message and "request id" in err.value.message
    assert len(err.value.message) < 200 and TRACEBACK not in err.value.message


@pytest.mark.ray
@pytest.mark.parametrize("method, path, status, code", [
    ("get", "/v1/nowhere", 404, "not_found"),
    ("get", "/v1/embeddings", 405, "method_not_allowed"),
    ("delete", "/v1/rerank", 405, "method_not_allowed"),
])
def test_unknown_routes_and_wrong_methods_use_the_openai_shape(serve_app, method, path, status, code):
    response = requests.request(method, serve_app + path, timeout=30)
    error = assert_openai_error(response, status)
    assert error["code"] == code and path in error["message"]


@pytest.mark.ray
@pytest.mark.parametrize("raw", ['{"model": "all-MiniLM-L6-v2", "input": "x",,}', '{"model": ', "not json"])
def test_malformed_json_names_the_body(serve_app, raw):
    error = assert_openai_error(post(serve_app, "/v1/embeddings", raw), 422)
    assert error["param"] == "body" and "not valid JSON" in error["message"]


@pytest.mark.ray
def test_a_body_that_is_not_an_object_names_the_body(serve_app):
    error = assert_openai_error(post(serve_app, "/v1/rerank", json.dumps(["q", "d"])), 422)
    assert error["param"] == "body"


@pytest.mark.ray
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v2/chat"])
def test_a_chat_content_part_that_is_not_text_is_a_400_naming_it(serve_app, path):
    """As OpenAI answers for a text-only model, rather than answering as if the image were not there."""
    image = {"type": "image_url", "image_url": {"url": "https://example.com/bee.png"}}
    body = {"model": "smollm2", "max_tokens": 4,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "what is this?"}, image]}]}
    error = assert_openai_error(post(serve_app, path, body), 400)
    assert error["param"] == "messages[0].content[1].type" and "'image_url'" in error["message"]


@pytest.fixture
def failing_app(serve_app):
    """``app_that_fails`` as a Serve app of its own, whose proxy gives each request its id."""
    from ray import serve

    @serve.deployment(name="failing-api", ray_actor_options={"num_cpus": 0})
    @serve.ingress(app_that_fails())
    class Failing:
        pass

    serve.run(Failing.bind(), name="failing", route_prefix="/failing")
    try:
        yield serve_app + "/failing"
    finally:
        serve.delete("failing")


@pytest.mark.ray
@pytest.mark.slow
def test_under_serve_an_unexpected_exception_names_serves_request_id(failing_app):
    response = requests.get(failing_app + "/boom", timeout=60)
    error = assert_openai_error(response, 500)
    assert response.headers["x-request-id"] in error["message"] and "secret" not in response.text
