"""A path with a trailing slash (``POST /v1/search/``, ``PUT /flows/``) is a JSON 404 that names the route without it:
Starlette answered a 307 redirect with an empty body, where every other error of the API is JSON with a code (a
client that does not follow redirects got no error to read). The page's own redirects stay: ``/`` and ``/ui`` send a
browser to ``/ui/``. The service's app and error handlers, in this process (nothing here reaches a service or Ray)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture(scope="module")
def client():
    from serve.api import app

    return TestClient(app, follow_redirects=False)


@pytest.mark.parametrize("method, path, meant", [
    ("post", "/v1/search/", "/v1/search"), ("put", "/flows/", "/flows"), ("get", "/healthz/", "/healthz"),
    ("get", "/tasks/", "/tasks"), ("post", "/v1/embeddings/", "/v1/embeddings"),
])
def test_a_trailing_slash_is_a_json_404_that_names_the_route_without_it(client, method, path, meant):
    answer = client.request(method.upper(), path, json={})
    assert answer.status_code == 404, (answer.status_code, answer.headers.get("location"))
    error = answer.json()["error"]
    assert error["code"] == "not_found"
    assert error["message"] == f"no route {path}; did you mean {meant} (no / at the end)?"


@pytest.mark.parametrize("path", ["/nowhere/", "/ui/nope/", "/v1/"])
def test_a_path_that_is_no_route_without_its_slash_either_gets_no_hint(client, path):
    answer = client.get(path)
    assert answer.status_code == 404
    assert answer.json()["error"]["message"] == f"no route {path}"


@pytest.mark.parametrize("path", ["/", "/ui"])
def test_the_page_is_still_reached_from_the_service_root_and_from_ui_without_its_slash(client, path):
    answer = client.get(path)
    assert answer.status_code == 307 and answer.headers["location"].endswith("/ui/")
    assert client.get(answer.headers["location"]).status_code == 200
