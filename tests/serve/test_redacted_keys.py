"""A flow saved by the CLI (``tessera flows save``: a spec of one's own, ``flows.store.save``) may hold a key
(``rerank.api``'s ``api_key``, a ``user_headers`` header that carries one), also in a step that runs others
(``retrieve.multi_collection``'s ``postprocess``). The service shows it with each key replaced by ``***redacted***``
(``GET /flows/{name}``, which the web UI's Flows and Search tabs read; ``GET /flows`` names no key), with or without
API keys, and leaves the file as it is; the spec read back and sent again (``PUT``) is refused with a 422
``key_in_spec`` that says the value is the redaction, and nothing is saved. Before, ``GET /flows/{name}`` gave the key
back in clear. The service's FastAPI app under uvicorn on 127.0.0.1 (no Ray: nothing runs)."""

from __future__ import annotations

import hashlib

import pytest
import requests

from flows import store as flow_store
from flows.spec import FlowSpec
from serve.security.spec_guard import REDACTED
from tests.serve.conftest import api_on_localhost

KEY = "sk-cli-saved-5e0c2b7d41a9f3"
COOKIE = "session=cli-saved-cookie-93d1"
URL = "https://rerank.example.com/v1/rerank"
RERANK = {"op": "rerank.api", "params": {"url": URL, "api_key": KEY, "user_headers": {
    "X-OpenWebUI-User-Id": "u1", "X-Api-Key": KEY, "cookie": COOKIE}}}
NESTED = {"op": "retrieve.multi_collection", "params": {"collections": [{"name": "a", "index": "news"}],
                                                        "postprocess": [{"op": "postprocess.dedup"}, RERANK]}}
SPEC = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}}, "rr": RERANK, "m": NESTED}}
CALLER = "sk-caller-of-alice-77"


@pytest.fixture(params=["no keys", "keys"])
def saved(request, make_service):
    """The service's base URL, the headers a caller sends, and the file of the flow ``keyed`` (``SPEC``) saved as
    the CLI saves it, in the caller's folder (a key's own folder holds one only if put there by hand)."""
    make_service()
    owner = None if request.param == "no keys" else "alice"
    path = flow_store.save("keyed", FlowSpec.parse(SPEC), owner=owner)
    keys = None if owner is None else {hashlib.sha256(CALLER.encode()).hexdigest(): owner}
    headers = {} if owner is None else {"Authorization": f"Bearer {CALLER}"}
    with api_on_localhost(keys) as url:
        yield url, headers, path


def test_a_key_in_a_saved_flow_is_shown_redacted_and_stays_in_its_file(saved):
    base, headers, path = saved
    on_disk = path.read_bytes()
    assert KEY.encode() in on_disk and COOKIE.encode() in on_disk
    answer = requests.get(f"{base}/flows/keyed", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert KEY not in answer.text and COOKIE not in answer.text
    steps = answer.json()["steps"]
    for params in (steps["rr"]["params"], steps["m"]["params"]["postprocess"][1]["params"]):
        assert params["api_key"] == REDACTED
        assert params["user_headers"] == {"X-OpenWebUI-User-Id": "u1", "X-Api-Key": REDACTED, "cookie": REDACTED}
        assert params["url"] == URL
    assert steps["m"]["params"]["postprocess"][0] == {"op": "postprocess.dedup"}
    listing = requests.get(f"{base}/flows", headers=headers, timeout=30)
    assert "keyed" in listing.json()["saved"] and KEY not in listing.text and COOKIE not in listing.text
    assert listing.json()["status"]["keyed"]["runnable"] is False
    assert path.read_bytes() == on_disk


def test_a_redacted_spec_sent_back_is_refused_saying_so(saved):
    base, headers, path = saved
    on_disk = path.read_bytes()
    shown = requests.get(f"{base}/flows/keyed", headers=headers, timeout=30).json()
    for name in ("keyed", "copy"):
        answer = requests.put(f"{base}/flows/{name}", json=shown, headers=headers, timeout=30)
        error = answer.json()["error"]
        assert (answer.status_code, error["code"], error["param"]) == (422, "key_in_spec", "steps.rr.params.api_key")
        assert f"{REDACTED} is what GET /flows/{{name}} shows" in error["message"], error
    del shown["steps"]["rr"]["params"]["api_key"]
    error = requests.put(f"{base}/flows/copy", json=shown, headers=headers, timeout=30).json()["error"]
    assert error["param"] == "steps.rr.params.user_headers.X-Api-Key" and REDACTED in error["message"], error
    assert path.read_bytes() == on_disk
    assert requests.get(f"{base}/flows/copy", headers=headers, timeout=30).status_code == 404


def test_a_step_whose_params_no_longer_validate_is_shown_redacted(make_service):
    """A flow file changed by hand (or saved before a param went): its step does not build, its key stays hidden."""
    make_service()
    path = flow_store.save("keyed", FlowSpec.parse({"steps": {"rr": RERANK}}))
    path.write_text(path.read_text().replace("url:", "gone_param: 1\n      url:"))
    with api_on_localhost() as base:
        answer = requests.get(f"{base}/flows/keyed", timeout=30)
    assert answer.status_code == 200 and KEY not in answer.text and COOKIE not in answer.text, answer.text
    assert answer.json()["steps"]["rr"]["params"]["gone_param"] == 1


@pytest.mark.parametrize("params", [{"user_headers": {"Authorization": f"Bearer {KEY}"}}, {"api_key": [KEY]}],
                         ids=["authorization", "not-a-string"])
def test_a_flow_file_whose_key_fails_to_validate_shows_no_key_in_its_reason(make_service, params):
    """Written by hand into the CLI's folder (``tessera flows save`` refuses both): the step does not build, and
    ``GET /flows`` says why, naming the field; before, its reason quoted the value it refused (the key)."""
    make_service()
    path = flow_store.save("keyed", FlowSpec.parse({"steps": {"rr": {"op": "rerank.api", "params": {"url": URL}}}}))
    path.write_text(FlowSpec.parse({"steps": {"rr": {"op": "rerank.api", "params": {"url": URL, **params}}}}).to_yaml())
    with api_on_localhost() as base:
        listing, shown = (requests.get(f"{base}/flows{name}", timeout=30) for name in ("", "/keyed"))
    reason = listing.json()["status"]["keyed"]["reason"]
    assert f"field 'steps.rr.params.{next(iter(params))}'" in reason and KEY not in reason, reason
    assert shown.status_code == 200 and KEY not in shown.text, shown.text
