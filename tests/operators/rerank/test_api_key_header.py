"""rerank.api sends its key in the header the API reads it from (``api_key_header``): ``Authorization: Bearer <key>``
by default, the bare key in any other (``X-Api-Key``, Azure's ``api-key``). A real server on 127.0.0.1 scores only a
request whose header holds the key (and no other header does), and answers 401 otherwise, as such APIs do. Before,
the key went as ``Authorization: Bearer`` only, and a spec that named the header was refused (an unknown param)."""

from __future__ import annotations

import pytest

from operators.errors import ParamsError
from operators.registry import get_operator
from operators.testing import JsonHandler, local_http_server, sample_results

KEY = "sk-header-key-2f9e41c07ab3"
KEY_VARIABLE = "TESSERA_TEST_HEADER_RERANK_KEY"
#: Per URL path, the header that must hold the key and what it holds.
WANTS = {"x-api-key": ("X-Api-Key", KEY), "api-key": ("api-key", KEY), "bearer": ("Authorization", f"Bearer {KEY}")}


class KeyedHandler(JsonHandler):
    """Scores the documents in reverse order once the path's header holds the key and no other header does."""

    def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
        body = self.read_json()
        header, value = WANTS[self.path.strip("/").split("/")[0]]
        elsewhere = [name for name, sent in self.headers.items() if KEY in sent and name.lower() != header.lower()]
        if self.headers.get(header) != value or elsewhere:
            return self.answer_json(401, {"message": f"no valid key in {header}"})
        count = len(body["documents"])
        self.answer_json(200, {"results": [{"index": i, "relevance_score": float(i)} for i in range(count)]})


@pytest.fixture(scope="module")
def base_url():
    with local_http_server(KeyedHandler) as url:
        yield url


@pytest.mark.parametrize("path, header", [("x-api-key", "X-Api-Key"), ("api-key", "api-key"),
                                          ("bearer", None), ("bearer", "authorization")])
def test_the_key_goes_in_the_named_header(base_url, monkeypatch, path, header):
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    params = {"url": f"{base_url}/{path}/rerank", "api_key_env": KEY_VARIABLE, "max_retries": 0, "on_error": "error"}
    op = get_operator("rerank.api")({**params, **({"api_key_header": header} if header else {})}, step_id="api")
    table = sample_results(n_queries=1, per_query=3)
    out = op(table)  # a 401 fails the step (on_error: error)
    assert out["docno"].to_pylist() == table["docno"].to_pylist()[::-1]  # the server's scores: the last first


@pytest.mark.parametrize("params, field, words", [
    ({"api_key_env": "K", "api_key_header": "X Api Key"}, "params.api_key_header", "not an HTTP header name"),
    ({"api_key_env": "K", "api_key_header": "Content-Type"}, "params.api_key_header", "sets itself"),
    ({"api_key_header": "X-Api-Key"}, "params.api_key_header", "no key is set"),
    ({"api_key_env": "K", "api_key_header": "X-Api-Key", "user_headers": {"x-api-key": "other"}},
     "params.user_headers", "the header of the key"),
])
def test_a_header_that_cannot_carry_the_key_is_refused_naming_the_field(params, field, words):
    with pytest.raises(ParamsError, match=words) as refused:
        get_operator("rerank.api")({"url": "https://rerank.example.com/v1/rerank", **params})
    assert refused.value.field == field
