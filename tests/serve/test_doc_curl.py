"""The curl examples of docs/serving.md and the README call the service as it is: each command's method and path is a
route of ``serve.api.app``, each JSON body sent to a model route validates against that route's request model (its
fields and types, strict as the route is), and the commands whose routes run without Ray (a search, a saved flow) run
through the in-process app on the bundled sample and answer as the page says. The others need Ray: the model routes
their Serve deployments, ``/task/*`` and uploads the task worker (and the search of ``handbook`` the index that the
upload before it makes). Nothing reaches a service or Ray here; Sybil's lexer finds the ```bash blocks."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Match
from sybil import Document
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "serving.md"]
RUN_HERE = {"/v1/search", "/flows/{name}"}  # routes that need no Ray: run on the sample below


def search_body(body: str) -> None:
    from serve.runs.flow_request import SearchRequest

    SearchRequest.model_validate_json(body)


def mosaic_body(body: str) -> None:
    from flows.mosaic_request import mosaic_spec
    from flows.spec import FlowSpec

    FlowSpec.parse(mosaic_spec(json.loads(body))[0]).build()


def flow_body(body: str) -> None:
    from flows.spec import FlowSpec

    FlowSpec.parse(json.loads(body)).build()


#: What the routes that take any JSON object read it as (Service.prepare, the flow store).
OBJECT_BODIES = {"/v1/search": search_body, "/task/enqueue": mosaic_body, "/flows/{name}": flow_body}


def curl_commands(page: Path) -> list[list[str]]:
    """The ``curl`` commands of ``page``'s shell blocks, as words: continuation lines joined, a quoted body over
    several lines kept whole, the ``)`` of ``id=$(curl ...)`` left out."""
    found = []
    for region in FencedCodeBlockLexer("bash|sh|shell|console")(Document(page.read_text(encoding="utf-8"), str(page))):
        pending = ""
        for line in re.sub(r"\\\n\s*", " ", str(region.lexemes["source"])).splitlines():
            if not pending and "curl " not in line:
                continue
            pending = f"{pending}\n{line}" if pending else line[line.index("curl "):]
            try:
                words = shlex.split(pending, comments=True)
            except ValueError:  # a quote still open: the body goes on on the next line
                continue
            if pending.count(")") > pending.count("("):
                words[-1] = words[-1].removesuffix(")")
            found.append(words)
            pending = ""
    return found


def request_of(words: list[str]) -> tuple[str, str, str | None]:
    """``(method, path, body)`` of a curl command against localhost:8000."""
    url = next(word for word in words[1:] if ":8000/" in word)
    body = words[words.index("-d") + 1] if "-d" in words else None
    method = words[words.index("-X") + 1] if "-X" in words else ("POST" if body else "GET")
    return method, "/" + url.split(":8000/", 1)[1], body


COMMANDS = [pytest.param(request_of(words), id=f"{page.name}:{' '.join(request_of(words)[:2])}")
            for page in PAGES for words in curl_commands(page)]


def route_of(method: str, path: str):
    from serve.api import app

    scope = {"type": "http", "method": method, "path": path}
    return next((route for route in app.routes if route.matches(scope)[0] == Match.FULL), None)


def test_the_pages_show_curl_commands():
    routes = {getattr(route_of(*request[:2]), "path", None) for request, in (command.values for command in COMMANDS)}
    assert len(COMMANDS) >= 12 and routes >= {"/v1/search", "/v1/embeddings", "/v1/rerank", "/v1/chat/completions",
                                              "/task/enqueue", "/flows/{name}", "/v1/indices/{name}/documents"}


@pytest.mark.parametrize("request_", COMMANDS)
def test_each_curl_command_names_a_route_and_a_body_it_takes(request_):
    method, path, body = request_
    route = route_of(method, path)
    assert route is not None, f"{method} {path}: no such route"
    model = getattr(getattr(route, "body_field", None), "field_info", None)
    if body is not None and isinstance(model and model.annotation, type):  # a pydantic request model
        model.annotation.model_validate_json(body)  # raises naming the field that is not its
        fields = {name for name, field in model.annotation.model_fields.items() for name in (name, field.alias)}
        ignored = set(json.loads(body)) - fields  # chat and rerank bodies ignore unknown fields (clients send more)
        assert not ignored, f"{path}: the page sends fields the route ignores: {sorted(ignored)}"
    elif body is not None:
        OBJECT_BODIES[route.path](body)


@pytest.fixture
def sample_service(sample_index, tmp_path, monkeypatch):
    """The service over the bundled sample (its default index), in this process, without Ray: the app's client."""
    from serve.api import app
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=str(sample_index), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    service = Service(resolve(args, environ={}), [], "tessera")
    service.warming.join(timeout=120)
    return TestClient(app)


@pytest.mark.integration
def test_the_commands_that_need_no_ray_answer_as_the_page_says(sample_service):
    ran = []
    for (method, path, body), in (command.values for command in COMMANDS):
        if route_of(method, path).path not in RUN_HERE or "handbook" in (body or ""):
            continue
        answer = sample_service.request(method, path, content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code in (200, 201), (method, path, answer.text)
        sent, got = json.loads(body), answer.json()
        if path == "/v1/search":
            hits = got["results"][0]["hits"]
            assert got["flow"] == sent["flow"] and len(hits) == sent["top_k"] and hits[0]["title"]
        else:
            assert got["name"] == path.rsplit("/", 1)[1] and got["spec"]["steps"] == sent["steps"]
        ran.append(path)
    assert sorted(set(ran)) == ["/flows/mine", "/v1/search"], ran
