"""API keys over real HTTP: an app with two keys (one hashed in the config, one from the environment) beside the
package's app. Every route but /healthz, the API's description (/openapi.json, /docs, /redoc) and the web UI's
static page (tests/ui) needs a key; each key reaches
only its own tasks, chats and saved flows, tried on every route with the other key's ids; the keys appear in no
log and no stored result."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest
import requests

from serve.service_settings import key_hash

pytestmark = pytest.mark.ray

ALICE = "alice-" + secrets.token_hex(16)
BOB = "bob-" + secrets.token_hex(16)
QUERY = "honey bees"


@pytest.fixture(scope="module")
def keyed(serve_app, sample_index, tmp_path_factory):
    from ray import serve

    from serve.app import build_app

    store = tmp_path_factory.mktemp("keyed") / "tasks.db"
    args = {"api_deployment": "keyed-api", "models": [], "service": {
        "default_index": str(sample_index), "task_store": f"sqlite:///{store}",
        "api_keys": [{"id": "alice", "sha256": key_hash(ALICE)}]}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TESSERA_API_KEYS", BOB)
        app = build_app(args)
    serve.run(app, name="keyed", route_prefix="/keyed", logging_config={"log_level": "WARNING"})
    try:
        yield {"url": serve_app + "/keyed", "store": store}
    finally:
        serve.delete("keyed")


def call(keyed, method: str, path: str, key: str | None, **kwargs) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.request(method, keyed["url"] + path, headers=headers, timeout=120, **kwargs)


@pytest.fixture(scope="module")
def alices(keyed) -> dict[str, str]:
    """Alice's task, chat and saved flow."""
    flow = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}}}
    assert call(keyed, "PUT", "/flows/private", ALICE, json=flow).status_code == 201
    answering = {"steps": {**flow["steps"], "context": {"op": "generate.context"}, "answer": {"op": "generate.answer"}}}
    assert call(keyed, "PUT", "/flows/asker", ALICE, json=answering).status_code == 201
    task = call(keyed, "POST", "/task/run", ALICE, json={"flow": "private", "query": QUERY}).json()
    assert task["status"] == "finished", task
    chat = call(keyed, "GET", "/task/chat/new", ALICE, params={"task_id": task["task_id"]})
    assert chat.status_code == 200, chat.text
    return {"task": task["task_id"], "chat": chat.text, "flow": "private"}


ROUTES = [("GET", "/tasks", {}), ("POST", "/task/run", {"json": {"flow": "bm25", "query": QUERY}}),
          ("POST", "/task/enqueue", {"json": {"flow": "bm25", "query": QUERY}}), ("GET", "/task/progress/x", {}),
          ("GET", "/task/cancel/x", {}), ("GET", "/task/chat/new", {"params": {"task_id": "x"}}),
          ("GET", "/task/chat/x", {"params": {"message": "hi"}}), ("GET", "/task/x/chats", {}),
          ("GET", "/pipeline/info", {}),
          ("GET", "/flows", {}), ("GET", "/flows/bm25", {}), ("PUT", "/flows/x", {"json": {}}),
          ("DELETE", "/flows/x", {}), ("POST", "/v1/search", {"json": {"query": QUERY}}), ("GET", "/v1/models", {}),
          ("POST", "/v1/embeddings", {"json": {"model": "m", "input": "x"}}),
          ("POST", "/v2/embed", {"json": {"model": "m", "texts": ["x"], "input_type": "search_query"}}),
          ("POST", "/v2/chat", {"json": {"model": "rag", "messages": [{"role": "user", "content": "x"}]}}),
          ("GET", "/no/such/route", {})]


@pytest.mark.parametrize("method,path,kwargs", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_route_but_healthz_needs_a_valid_key(keyed, method, path, kwargs):
    for key in (None, "not-a-key", ALICE[:-1]):
        response = call(keyed, method, path, key, **kwargs)
        assert response.status_code == 401, (key, response.text)
        assert response.json()["error"]["code"] == "invalid_api_key"
        assert response.headers["www-authenticate"] == "Bearer"


def test_healthz_needs_no_key(keyed):
    assert call(keyed, "GET", "/healthz", None).status_code == 200


@pytest.mark.parametrize("key", [None, ALICE], ids=["no key", "a key"])
def test_a_head_of_healthz_is_answered_as_its_get_without_a_body(keyed, key):
    """Load balancers probe with ``HEAD``, which was a 405 (docs/security.md: a GET/HEAD of /healthz is answered)."""
    got, head = call(keyed, "GET", "/healthz", key), call(keyed, "HEAD", "/healthz", key)
    assert (head.status_code, head.content) == (200, b""), head.headers
    assert head.headers["content-type"] == got.headers["content-type"] == "application/json"


def test_the_api_description_needs_no_key_and_says_which_routes_take_one(keyed):
    root = keyed["url"].removesuffix("/keyed")
    for page in ("/docs", "/redoc"):  # a browser sends no key for a page: it opens, with its scripts
        response = call(keyed, "GET", page, None)
        assert response.status_code == 200, response.text
        scripts = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', response.text)
        assert scripts and all(requests.get(root + s, timeout=30).status_code == 200 for s in scripts), scripts
    described = call(keyed, "GET", "/openapi.json", None).json()
    assert described["components"]["securitySchemes"]["apiKey"] == {
        "type": "http", "scheme": "bearer",
        "description": "an API key of the service: see docs/security.md (`tessera docs security`)"}
    paths = described["paths"]
    assert paths["/v1/search"]["post"]["security"] == [{"apiKey": []}]  # /docs' "Authorize" key goes with it
    assert paths["/task/run"]["post"]["security"] == [{"apiKey": []}]
    assert "security" not in paths["/healthz"]["get"] and "security" not in paths["/healthz"]["head"]
    assert call(keyed, "GET", "/static-offline-docs/no-such.js", None).status_code == 404  # open, and nothing else


def test_a_key_reaches_none_of_the_other_keys_ids(keyed, alices):
    task, chat, flow = alices["task"], alices["chat"], alices["flow"]
    assert call(keyed, "GET", f"/task/progress/{task}", BOB).status_code == 404
    assert call(keyed, "GET", f"/task/cancel/{task}", BOB).status_code == 404
    assert call(keyed, "GET", "/task/chat/new", BOB, params={"task_id": task}).status_code == 404
    assert call(keyed, "GET", f"/task/chat/{chat}", BOB, params={"message": "hi"}).status_code == 404
    assert call(keyed, "GET", f"/task/{task}/chats", BOB).status_code == 404
    assert call(keyed, "GET", f"/flows/{flow}", BOB).status_code == 404
    assert call(keyed, "DELETE", f"/flows/{flow}", BOB).status_code == 404
    for route in ("/task/run", "/task/enqueue", "/v1/search"):
        refused = call(keyed, "POST", route, BOB, json={"flow": flow, "query": QUERY})
        assert refused.status_code == 422 and refused.json()["error"]["param"] == "flow"
    assert call(keyed, "GET", "/tasks", BOB).json() == {"tasks": [], "next": None, "counts": {}}
    assert call(keyed, "GET", "/flows", BOB).json()["saved"] == []
    # Alice's flow that answers is a chat model for her only.
    models = {key: {m["id"] for m in call(keyed, "GET", "/v1/models", key).json()["data"]} for key in (ALICE, BOB)}
    assert "asker" in models[ALICE] and "asker" not in models[BOB] and "rag" in models[BOB]
    chat = call(keyed, "POST", "/v1/chat/completions", BOB, json={"model": "asker", "messages": [
        {"role": "user", "content": QUERY}]})
    assert chat.status_code == 404 and chat.json()["error"]["param"] == "model"
    assert call(keyed, "GET", "/v1/models/asker", BOB).status_code == 404
    # Bob's flow of the same name is his own; Alice's is untouched, and her ids still work for her.
    mine = {"steps": {"dense": {"op": "retrieve.dense", "params": {"k": 2}}}}
    assert call(keyed, "PUT", f"/flows/{flow}", BOB, json=mine).status_code == 201
    assert call(keyed, "GET", f"/flows/{flow}", ALICE).json()["steps"]["bm25"]["params"] == {"k": 3}
    assert call(keyed, "GET", f"/flows/{flow}", BOB).json()["steps"] == mine["steps"]
    assert call(keyed, "GET", f"/task/progress/{task}", ALICE).json()["status"] == "finished"
    assert [t["id"] for t in call(keyed, "GET", "/tasks", ALICE).json()["tasks"]] == [task]


@pytest.mark.slow  # long on its own (two answers of the embedded model / a whole app's logs)
def test_the_keys_are_in_no_log_and_no_stored_result(keyed, alices):
    import ray

    call(keyed, "GET", "/task/progress/x", ALICE)  # a refused and an accepted request, logged by Serve
    call(keyed, "GET", "/tasks", "wrong-" + BOB)
    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    places = [p for p in logs.rglob("*") if p.is_file()] + list(keyed["store"].parent.iterdir())  # db, -wal
    assert len(places) > 5
    for place in places:
        data = place.read_bytes()
        for key in (ALICE, BOB):
            assert key.encode() not in data, f"a key is written in {place}"
