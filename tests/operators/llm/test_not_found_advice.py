"""A 404 from an alias's own OpenAI-compatible server said "NotFoundError: Error code: 404 - {'detail': 'Not
Found'}" and no more: it now says what most often causes it, an ``api_base`` without its ``/v1`` (vLLM's and
llama.cpp's servers answer under it), else a model the server does not serve. A real server on localhost that
answers every POST as FastAPI answers a route it lacks."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from operators.llm import LLMError, complete
from operators.testing import local_http_server


class NoRoute(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802  (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = json.dumps({"detail": "Not Found"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.mark.parametrize("path, says", [
    ("", "the server has no chat completions at {base}/chat/completions: an OpenAI-compatible server's api_base ends "
         "in /v1 (vLLM's, llama.cpp's, Tessera's own); fix it in the alias's models file"),
    ("/v1", "the server serves no model 'qwen' (GET {base}/models lists those it does), or has no chat completions: "
            "fix the alias's model or api_base in its models file"),
])
def test_a_404_from_an_aliass_own_server_says_what_to_check(tmp_path, monkeypatch, path, says):
    with local_http_server(NoRoute) as url:
        base = url + path
        models = tmp_path / "models.yaml"
        models.write_text(f"mine: {{model: hosted_vllm/qwen, api_base: '{base}'}}\n")
        monkeypatch.setenv("TESSERA_MODELS", str(models))
        with pytest.raises(LLMError) as err:
            complete("hi", model="mine", num_retries=0)
    assert err.value.kind == "not_found" and err.value.message.endswith(says.format(base=base)), err.value.message
