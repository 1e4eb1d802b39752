"""Over HTTP, the search and task routes answer a body that is not JSON as every other route does: a 422 ``body``
saying to send ``Content-Type: application/json`` (``curl -d`` sends a form's type; a body with no type at all is not
read as JSON either), and JSON that is not an object, or a ``flow`` that is neither a name nor a spec, is named in
JSON's words (``null``). Before, ``curl $B/v1/search -d '{...}'`` was a 422 ``invalid_spec`` "the body must be a JSON
object, got bytes", a ``null`` body "got NoneType" and ``{"flow": null}`` "not NoneType". The service's FastAPI app
under uvicorn on 127.0.0.1 (no Ray: every body here is refused before a flow runs)."""

from __future__ import annotations

import pytest
import requests

ROUTES = ["/v1/search", "/task/run", "/task/enqueue"]
BODY = b'{"flow": "bm25", "query": "honey"}'


def refusal(response: requests.Response) -> dict:
    assert response.status_code == 422, response.text
    return response.json()["error"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("content_type, said", [
    ("application/x-www-form-urlencoded", "this request's is 'application/x-www-form-urlencoded'"),  # curl -d
    ("text/plain; charset=utf-8", "this request's is 'text/plain'"),
    (None, "this request has none"),
])
def test_a_body_not_sent_as_json_is_answered_as_on_every_route(base, route, content_type, said):
    headers = {} if content_type is None else {"Content-Type": content_type}
    error = refusal(requests.post(base + route, data=BODY, headers=headers, timeout=30))
    assert error == {"message": f"body: send it as JSON with the header Content-Type: application/json; {said}, so "
                                "its body was not read as JSON",
                     "type": "invalid_request_error", "param": "body", "code": "invalid_value"}
    saved = refusal(requests.put(base + "/flows/mine", data=BODY, headers=headers, timeout=30))
    assert saved == error  # the same answer as a route that always read its body as an object


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("body, kind", [(b"null", "null"), (b"[1]", "an array"), (b'"bees"', "a string"),
                                        (b"3", "a number")])
def test_json_that_is_not_an_object_is_named_in_json_words(base, route, body, kind):
    error = refusal(requests.post(base + route, data=body, headers={"Content-Type": "application/json"}, timeout=30))
    assert (error["param"], error["code"]) == ("body", "invalid_value"), error
    assert error["message"] == f"body: must be a JSON object, not {kind}", error


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("flow, kind", [(None, "null"), (5, "a number"), (["bm25"], "an array"), (True, "true/false")])
def test_a_flow_neither_named_nor_spelled_out_is_named_in_json_words(base, route, flow, kind):
    error = refusal(requests.post(base + route, json={"flow": flow, "query": "honey"}, timeout=30))
    assert error["param"] == "flow", error
    assert f"a flow's name (a string) or an inline spec (an object), not {kind}" in error["message"], error
    assert "NoneType" not in error["message"] and "int" not in error["message"], error


@pytest.mark.parametrize("route", [*ROUTES, "/v1/embeddings"])
def test_broken_json_is_a_body_that_cannot_be_read(base, route):
    """Its code was invalid_value, while bytes that are not UTF-8 were invalid_body (docs/serving.md lists both)."""
    broken = b'{"flow": "bm25",,}'
    error = refusal(requests.post(base + route, data=broken, headers={"Content-Type": "application/json"}, timeout=30))
    assert (error["param"], error["code"]) == ("body", "invalid_body"), error
    assert "not valid JSON" in error["message"]
