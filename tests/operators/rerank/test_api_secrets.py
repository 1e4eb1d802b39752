"""rerank.api's keys reach the service and nowhere else: not the logs, the repr, the errors or the results.

A real server on 127.0.0.1 checks the key and, on one path, echoes it back in a 401 body, as some services
do; the key must come out masked wherever the operator reports that answer.
"""

from __future__ import annotations

import json
import logging

import pytest

from operators.errors import OperatorError
from operators.registry import get_operator
from operators.testing import JsonHandler, local_http_server, sample_results

ENV_KEY = "sk-env-secret-8c1f0a7d93e4b2"
INLINE_KEY = "sk-inline-secret-41d7e6a0c95f"
KEY_VARIABLE = "TESSERA_TEST_SECRET_RERANK_KEY"


class Handler(JsonHandler):
    authorizations: list[str] = []

    def do_POST(self) -> None:
        body = self.read_json()
        authorization = self.headers.get("Authorization", "")
        Handler.authorizations.append(authorization)
        if self.path.startswith("/echo"):
            self.answer_json(401, {"message": f"invalid api key: {authorization}"})
        else:
            results = [{"index": i, "relevance_score": 1.0 / (1 + i)} for i in range(len(body["documents"]))]
            self.answer_json(200, {"results": results})


@pytest.fixture(scope="module")
def base_url():
    with local_http_server(Handler) as url:
        yield url


def test_keys_reach_the_server_and_nowhere_else(base_url, monkeypatch, caplog):
    monkeypatch.setenv(KEY_VARIABLE, ENV_KEY)
    Handler.authorizations.clear()
    table = sample_results(n_queries=2, per_query=3)

    def make(path: str, **params):
        return get_operator("rerank.api")({"url": f"{base_url}/{path}/rerank", "max_retries": 0, **params},
                                          step_id="api")

    ok_env, ok_inline = make("ok", api_key_env=KEY_VARIABLE), make("ok", api_key=INLINE_KEY)
    echoed, failing = make("echo", api_key_env=KEY_VARIABLE), make("echo", api_key=INLINE_KEY, on_error="error")
    with caplog.at_level(logging.DEBUG):
        results = [ok_env(table), ok_inline(table), echoed(table)]
        with pytest.raises(OperatorError) as failure:
            failing(table)
    metadata = echoed.drain_metadata()

    assert set(Handler.authorizations) == {f"Bearer {ENV_KEY}", f"Bearer {INLINE_KEY}"}
    assert metadata["q1"]["degraded"]["reason"].endswith('invalid api key: Bearer ***"}')
    assert "invalid api key: Bearer ***" in str(failure.value)
    assert results[0]["score_api"].null_count == 0 and results[2]["score_api"].null_count == results[2].num_rows
    seen = {
        "logs": caplog.text,
        "log records": repr([(r.msg, r.args) for r in caplog.records]),
        "repr": repr([ok_env, ok_inline, echoed, failing]),
        "params": repr([op.params for op in (ok_env, ok_inline)]) + ok_inline.params.model_dump_json(),
        "error": f"{failure.value} {failure.value!r} {failure.value.to_dict()}",
        "result metadata": json.dumps(metadata),
        "result rows": repr([t.to_pylist() for t in results]),
    }
    for where, text in seen.items():
        assert ENV_KEY not in text and INLINE_KEY not in text, f"a key leaked into the {where}"
    assert "invalid api key" in caplog.text  # the warning was logged, masked
