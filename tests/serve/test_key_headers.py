"""A request with several ``Authorization`` headers is refused: the app read the last one (``dict`` of the headers),
so a valid key followed by another key acted as the other key, and a proxy that reads the first would check one key
while the app used another. Real HTTP on 127.0.0.1 (the service's FastAPI app under uvicorn), no Ray."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from tests.serve.conftest import api_on_localhost

ALICE, BOB = "a" * 32, "b" * 32


def get(url: str, *keys: str) -> tuple[int, dict]:
    """``GET /v1/indices`` with one ``Authorization`` header per key (``requests`` sends one per name)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.putrequest("GET", "/v1/indices")
        for key in keys:
            connection.putheader("Authorization", f"Bearer {key}")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_two_authorization_headers_are_a_401_whichever_keys_they_hold(make_service):
    from serve.service_settings import key_hash

    make_service()
    with api_on_localhost({key_hash(ALICE): "alice", key_hash(BOB): "bob"}) as url:
        assert get(url, ALICE)[0] == 200
        for keys in ((ALICE, BOB), (ALICE, ALICE), ("not-a-key", ALICE), (ALICE, "not-a-key")):
            status, body = get(url, *keys)
            assert status == 401, (keys, body)
            assert body["error"] == {"message": "send one Authorization header, not 2", "type": "invalid_request_error",
                                     "param": None, "code": "invalid_api_key"}
        assert get(url)[1]["error"]["message"] == "a valid API key is required: send 'Authorization: Bearer KEY'"
