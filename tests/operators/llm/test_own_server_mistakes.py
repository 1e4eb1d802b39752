"""The usual mistakes of a user who points an alias at an OpenAI-compatible server of their own (llama.cpp's, vLLM's),
against a real plain-HTTP server on localhost that answers as those do (``/v1/models``, ``/v1/chat/completions``):

* ``https://`` for a server that speaks plain http: the run's check took the failed TLS handshake for a server that
  listens, and every call failed after its retries with litellm's "Connection error." and no cause;
* an ``api_base`` without its ``/v1``: ``tessera models`` said the server answers, and the run sent every call to a
  404;
* a prompt longer than the server's context window: the server's "Please reduce the length of the messages" named no
  param of Tessera's to change.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from flows.model_check import check_env
from flows.spec import FlowSpec
from operators.llm import LLMError, complete
from operators.llm.aliases import resolve
from operators.llm.reachable import ModelUnreachableError, forget_answers, reachability
from operators.testing import local_http_server

#: What OpenAI (and llama.cpp's server) and vLLM answer a prompt past the model's window (an HTTP 400).
PAST_WINDOW = ("This model's maximum context length is 512 tokens. However, you requested 836 tokens (832 in the "
               "messages, 4 in the completion). Please reduce the length of the messages or completion.")
TOO_LONG = {"openai": {"error": {"message": PAST_WINDOW, "type": "invalid_request_error",
                                 "code": "context_length_exceeded"}},
            "vllm": {"object": "error", "message": PAST_WINDOW, "type": "BadRequestError", "param": None, "code": 400}}


class OwnServer(BaseHTTPRequestHandler):
    """Routes under ``/v1`` only, as llama.cpp's and vLLM's servers have them; every chat prompt is too long."""

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802  (http.server's name)
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "smollm2", "object": "model"}]})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/v1/chat/completions":
            self._send(400, TOO_LONG[self.headers.get("X-Shape") or "openai"])
        else:
            self._send(404, {"detail": "Not Found"})


@pytest.fixture(scope="module")
def own_server():
    with local_http_server(OwnServer) as url:
        yield url


@pytest.fixture
def alias_to(tmp_path, monkeypatch):
    """``alias_to(api_base)``: the alias ``mine`` (``openai/smollm2`` at ``api_base``, no retry) in force."""
    monkeypatch.setenv("MINE_KEY", "sk-own-server-test")
    forget_answers()

    def write(api_base: str, model: str = "openai/smollm2") -> str:
        models = tmp_path / "models.yaml"
        models.write_text(f"mine: {{model: {model}, api_base: '{api_base}', api_key_env: MINE_KEY, "
                          "num_retries: 0}\n")
        monkeypatch.setenv("TESSERA_MODELS", str(models))
        return "mine"

    return write


def _refusal(model: str) -> ModelUnreachableError:
    spec = FlowSpec.parse({"steps": {"answer": {"op": "generate.answer", "params": {"model": model}}}})
    with pytest.raises(ModelUnreachableError) as err:
        check_env(spec)
    assert err.value.field == "steps.answer.params.model"
    return err.value


def test_https_for_a_plain_http_server_is_said_with_the_url_to_use(own_server, alias_to):
    https = own_server.replace("http://", "https://") + "/v1"
    model = alias_to(https)
    says = (f"the server at {https} speaks http, not https (its TLS handshake fails); change the alias's api_base to "
            f"{own_server}/v1 in its models file")
    ok, why = reachability(resolve(model), timeout=2)
    assert not ok and why == says, why
    assert says in _refusal(model).message
    with pytest.raises(LLMError) as err:  # a call made without the run's check (Python, the service's gateway)
        complete("hi", model=model, max_tokens=4)
    assert err.value.kind == "connection" and "the TLS handshake failed" in err.value.message, err.value.message
    assert "Connection error." not in err.value.message and "sk-own-server-test" not in err.value.message


@pytest.mark.parametrize("suffix", ["", "/"])
def test_an_api_base_without_v1_is_not_reachable_and_says_the_base_to_use(own_server, alias_to, suffix):
    model = alias_to(own_server + suffix)
    says = (f"the server answers on {own_server}/v1, not on {own_server}: an OpenAI-compatible server's api_base "
            f"ends in /v1; change the alias's api_base to {own_server}/v1 in its models file")
    ok, why = reachability(resolve(model), timeout=2)
    assert not ok and why == says, why
    assert says in _refusal(model).message


def test_the_right_api_base_still_answers_with_or_without_its_trailing_slash(own_server, alias_to):
    for base in (f"{own_server}/v1", f"{own_server}/v1/"):
        ok, why = reachability(resolve(alias_to(base)), timeout=2)
        assert ok and why == f"a server answers on {base}", why


@pytest.mark.parametrize("shape", sorted(TOO_LONG))
def test_a_prompt_past_the_servers_context_window_names_the_params_to_lower(own_server, alias_to, shape):
    model = alias_to(own_server + "/v1")
    with pytest.raises(LLMError) as err:
        complete("honey " * 50, model=model, max_tokens=4, extra_headers={"X-Shape": shape})
    message = err.value.message
    assert err.value.kind == "bad_request" and f"model 'mine' (openai/smollm2 at {own_server}/v1)" in message
    assert "maximum context length is 512 tokens" in message and "\n" not in message, message
    assert message.endswith("(the prompt does not fit the model's context window: give the flow's generate.context "
                            "step a smaller max_context_length, or the step a smaller max_tokens)"), message


def test_tessera_models_says_what_to_do_when_the_server_is_down_as_the_run_does(alias_to):
    """``tessera models`` said "no server answers on URL (ConnectionError)" and no more, where a run's refusal says to
    start it or change the api_base."""
    from operators.llm.testing import closed_port

    base = f"http://127.0.0.1:{closed_port()}/v1"
    ok, why = reachability(resolve(alias_to(base)), timeout=2)
    assert not ok and why == (f"no server answers on {base} (ConnectionError); start it, or change the alias's "
                              "api_base in its models file"), why


def test_tessera_models_says_when_the_server_does_not_list_the_aliass_model(own_server, alias_to):
    """A misspelt model name (``openai/smolm2``) was "a server answers on URL", and vLLM refuses each of its calls
    with a 404; the server's list is now said beside it (still reachable: llama.cpp's server answers any name)."""
    base = f"{own_server}/v1"
    ok, why = reachability(resolve(alias_to(base, "openai/smolm2")), timeout=2)
    assert ok and why == (f"a server answers on {base}; it lists smollm2, not 'smolm2' (a server that serves only the "
                          "models it lists, as vLLM, refuses the calls: fix the alias's model in its models file)"), why
