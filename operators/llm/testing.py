"""A local fault server for LLM operator tests: OpenAI's chat-completions API on 127.0.0.1.

A real HTTP server (stdlib ``ThreadingHTTPServer``) that litellm reaches like any
OpenAI-compatible endpoint, at ``http://127.0.0.1:PORT/<scenario>/v1``. The scenario in
the path picks the behaviour:

* ``ok``: answers ``server.reply`` (settable), with usage counted in words;
* ``error``: HTTP 500 every time; ``flaky``: 500 on the first attempt, then ``ok``;
* ``ratelimit``: HTTP 429; ``slow``: waits ``server.delay`` seconds, then ``ok`` (from attempt ``server.hold_from``
  on, if set, until ``server.release`` is set: a test's calls that cannot end before it acts);
* ``junk``: a reply with no text (``"  ...  "``); ``malformed``: a body that is not JSON; ``html``: a web page
  (``text/html``, what a proxy's error or login page sends); ``shapeless``: JSON that is no completion (``{"foo": 1}``);
* ``midstream``: a streamed reply that breaks after half its words (an error event), HTTP 500 unstreamed;
* ``paced``: as ``ok``, but a streamed reply comes a word every ``server.pace`` seconds (a model writing it), and a
  stream whose client went away before its end is counted in ``server.left``;
* ``unavailable``: HTTP 503; ``ratelimit`` also says ``Retry-After: 1``;
* ``reset``: the headers and half the body of a 200, then the connection closed (reset mid-body);
* ``cut``: a streamed reply that stops after half its words with no error and no ``[DONE]`` (unstreamed: as ``reset``);
* ``nochoices``: 200 with ``choices: []``; ``null``: ``content: null``; ``tools``: ``tool_calls`` and no content;
* ``length``: as ``ok``, but the finish reason is ``length`` (the model stopped at ``max_tokens``; streamed too);
  ``filtered``: as ``ok``, but the finish reason is ``content_filter`` (the provider's filter stopped the reply);
* ``huge``: a 1 MB reply; ``binary``: a body that is not UTF-8; ``echo``: the prompt's last message as the reply
  (these two stream when asked to; the other 200s answer a stream with their JSON body);
* ``parts``: a completion whose ``content`` is a list of parts (``[{"type": "text", ...}]``), not OpenAI's text;
* ``failed200``: HTTP 200 whose JSON is an error object (``{"error": {"message": ...}}``, as OpenRouter answers when
  the provider behind it failed);
* ``eventless``: a streamed reply whose events hold no choice (``choices: []``), then ``[DONE]`` (unstreamed: as
  ``nochoices``);
* ``leaky``: HTTP 401 whose message quotes the key it was sent (as some proxies and self-hosted servers do);
* ``trickle``: a reply that takes ``server.delay`` seconds and never goes quiet for long: streamed, its first word
  every ``server.pace`` seconds, then the rest; unstreamed, a space every ``server.pace`` seconds (the keep-alive bytes
  some proxies send before a reply), then the completion; a client that goes away first is counted in ``server.left``.

The alias ``fault-refused`` points at a port nothing listens on (connection refused).

A request with ``stream: true`` gets the reply as server-sent events, a word a chunk (with the
usage last when ``stream_options.include_usage`` asks for it), as OpenAI streams.

It counts attempts per scenario and the most requests it answered at once since its last reset
(``server.peak``: how far a client's concurrency went), and answers ``GET /api/tags`` as an Ollama server would, and
``GET /<scenario>/v1/models`` as a vLLM server started with ``--api-key`` would (401 without a key;
500 for ``error``).
``models_file`` writes a models.yaml whose aliases (``fault-ok``, ``fault-error``, ...)
point at it, for ``$TESSERA_MODELS``. ``CountingServer`` answers any GET and counts them: how often a run's check of
a model's server (``operators.llm.reachable``) asked it. Usage::

    with FaultServer() as server:
        path = server.models_file(tmp_path / "models.yaml")   # set TESSERA_MODELS=path, TESSERA_FAULT_KEY=anything
        complete("hi", model="fault-ok").text == server.reply
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

SCENARIOS = ("ok", "error", "flaky", "ratelimit", "slow", "junk", "malformed", "midstream", "paced", "unavailable",
             "reset", "cut", "nochoices", "null", "tools", "huge", "binary", "echo", "length", "html", "shapeless",
             "leaky", "parts", "failed200", "eventless", "filtered", "trickle")
#: Replies that are not the ``ok`` reply, by scenario (None: the message's content is null).
_ODD_CONTENT = {"null": None, "tools": None, "huge": "word " * 200_000}
#: The environment variable the fault aliases read their (any) key from.
KEY_ENV = "TESSERA_FAULT_KEY"


#: A timeout for a call to ``slow``, whose reply comes after ``delay`` (5 s): it runs out well before, and sooner than
#: the 0.5 s given to a reply that does come, on loaded cores.
SLOW_TIMEOUT_S = 0.2


#: The longest a held ``slow`` call waits for ``release`` (a test that never sets it does not hang its server).
HELD_S = 60.0


class _Listening(ThreadingHTTPServer):
    """The stdlib's server with a listen backlog a burst of calls fits in: of its 5, a gateway that opens 16
    connections at once (its async calls, on one loop) had the kernel drop the rest, each sent again a second later (16
    calls of 1 s at once: 10 in flight, 2.2 s; 8 threads of 25 calls: 10 s, not 1.3 s), in this test process whose
    calls hold the GIL its accepting thread needs. A model server's backlog (uvicorn's 2048) takes them all."""

    request_queue_size = 128


class FaultServer:
    """The server and what it saw; see the module docstring."""

    def __init__(self, reply: str = "Honey bees make honey [1].\nSources: 1", delay: float = 5.0) -> None:
        self.reply = reply
        self.delay = self._delay = delay
        self.pace = self._pace = 0.05  # seconds between the words of a ``paced`` stream
        self.attempts: Counter = Counter()
        self.left: Counter = Counter()  # by scenario: streams whose client went away before their end
        self.in_flight: Counter = Counter()  # POSTs being answered now, by the reset they came after
        self.peak = 0  # the most POSTs answered at once since the last reset (one sent before it does not count)
        self.generation = 0  # resets so far
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.hold_from: int | None = None  # ``slow`` attempts from this one on wait for ``release``
        self._server = _Listening(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "FaultServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api_base(self, scenario: str) -> str:
        return f"{self.base}/{scenario}/v1"

    def reset(self) -> None:
        with self.lock:
            self.attempts.clear()
            self.bodies.clear()
            self.left.clear()
            self.generation += 1
            self.peak = 0
            self.hold_from = None
            self.release.clear()
            # a test that slows or speeds the server leaves the next one the server it expects
            self.delay, self.pace = self._delay, self._pace

    def models_file(self, path: Path, **limits: Any) -> Path:
        """A models.yaml with one alias ``fault-<scenario>`` per scenario (``limits`` added to each entry)."""
        entries = {f"fault-{s}": {"model": f"openai/fault-{s}", "api_base": self.api_base(s),
                                  "api_key_env": KEY_ENV, "description": f"fault server: {s}", **limits}
                   for s in SCENARIOS}
        entries["fault-refused"] = {**entries["fault-ok"], "api_base": f"http://127.0.0.1:{closed_port()}/v1",
                                    "description": "nothing listens there"}
        path.write_text(yaml.safe_dump(entries), encoding="utf-8")
        return path


class CountingServer:
    """A real HTTP server on 127.0.0.1 (``port``: 0 for a free one; ``operators.testing.local_http_server``) that
    answers every GET ``status`` (``/api/tags`` 200, as Ollama does) and counts the GETs by path in ``asked``: how
    often a run's check asked it. ``base``: its URL, once entered."""

    def __init__(self, port: int = 0, status: int = 401) -> None:
        from operators.testing import local_http_server

        self.asked: Counter = Counter()
        lock, server = threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802  (http.server's name)
                with lock:
                    server.asked[self.path] += 1
                self.send_response(200 if self.path.rstrip("/") == "/api/tags" else status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._running = local_http_server(Handler, port)

    def __enter__(self) -> "CountingServer":
        self.base = self._running.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._running.__exit__(*exc)


def closed_port() -> int:
    """A localhost port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _completion(body: dict[str, Any], text: str | None) -> dict[str, Any]:
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    words = len((text or "").split())
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fault"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": words,
                      "total_tokens": len(prompt.split()) + words}}


def _odd(scenario: str, body: dict[str, Any], reply: str) -> tuple[int, Any, bytes | None]:
    """The status, payload and raw body of the scenarios that answer 200 with something odd (or fail plainly)."""
    if scenario == "unavailable":
        return 503, {"error": {"message": "the fault server is unavailable on purpose", "type": "server_error"}}, None
    if scenario == "binary":
        return 200, None, b'{"choices": [{"message": {"content": "\xff\xfe\x80 ' + bytes(range(128, 256)) + b'"}}]}'
    if scenario == "echo":
        last = (body.get("messages") or [{}])[-1].get("content")
        return 200, _completion(body, last if isinstance(last, str) else json.dumps(last)), None
    whole = _completion(body, _ODD_CONTENT.get(scenario, reply))
    if scenario == "nochoices":
        whole["choices"] = []
    if scenario in ("length", "filtered"):
        whole["choices"][0]["finish_reason"] = "length" if scenario == "length" else "content_filter"
    if scenario == "parts":
        whole["choices"][0]["message"]["content"] = [{"type": "text", "text": reply}]
    if scenario == "tools":
        whole["choices"][0]["message"]["tool_calls"] = [{"id": "call_1", "type": "function", "function": {
            "name": "search", "arguments": json.dumps({"query": "honey"})}}]
        whole["choices"][0]["finish_reason"] = "tool_calls"
    return 200, whole, None


def _chunks(body: dict[str, Any], text: str, broken: bool, cut: bool = False,
            finish: str = "stop") -> list[dict[str, Any]]:
    """OpenAI's stream of ``text``: a chunk a word, the finish, and the usage when asked for; ``broken``: half
    the words, then an error; ``cut``: half the words and nothing more."""
    whole = _completion(body, text)
    head = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"], "model": whole["model"]}
    words = re.findall(r"\s*\S+", text) if len(text) < 10_000 else re.findall(r"(?s).{1,10000}", text)
    if broken or cut:
        end = [] if cut else [{"error": {"message": "the fault server broke off on purpose", "type": "server_error"}}]
        return [{**head, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
                for w in words[:len(words) // 2]] + end
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": w} if i == 0 else
                                    {"content": w}, "finish_reason": None}]} for i, w in enumerate(words)]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**head, "choices": [], "usage": whole["usage"]})
    return chunks


def _handler(state: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: Any, raw: bytes | None = None, cut: bool = False,
                  headers: dict[str, str] | None = None, content_type: str = "application/json") -> None:
            """The response; ``cut``: its headers and half its body, then the connection reset."""
            data = raw if raw is not None else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data[:len(data) // 2] if cut else data)
                if cut:
                    self.wfile.flush()
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                pass

        def _stream(self, chunks: list[dict[str, Any]], scenario: str = "", pace: float = 0.0,
                    done: bool = True) -> None:
            """Server-sent events, one chunk each (``pace`` seconds apart), the connection closed at the end (HTTP/1.0:
            no length), ``[DONE]`` last unless ``done`` is False; a client that goes away first is counted in
            ``left``."""
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(pace)
                if done and "error" not in chunks[-1]:
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with state.lock:
                    state.left[scenario] += 1

        def _trickle(self, streamed: bool, body: dict[str, Any]) -> None:
            """``trickle``: a word (streamed) or a space every ``pace`` seconds for ``delay`` s, then the reply."""
            chunks = _chunks(body, state.reply, broken=False)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if streamed else "application/json")
                self.end_headers()
                until, count = time.monotonic() + state.delay, 0
                while time.monotonic() < until:  # (a number a word: litellm ends a stream of one chunk repeated)
                    count += 1
                    word = {**chunks[0], "choices": [{"index": 0, "delta": {"content": f"{count} "}}]}
                    self.wfile.write(f"data: {json.dumps(word)}\n\n".encode() if streamed else b" ")
                    self.wfile.flush()
                    time.sleep(state.pace)
                ends = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks[1:]] + ["data: [DONE]\n\n"]
                self.wfile.write("".join(ends).encode() if streamed else json.dumps(_completion(body, state.reply))
                                 .encode())
            except (BrokenPipeError, ConnectionResetError):
                with state.lock:
                    state.left["trickle"] += 1

        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            scenario = self.path.strip("/").split("/", 1)[0]
            if self.path.rstrip("/") == "/api/tags":
                self._send(200, {"models": []})
            elif self.path.rstrip("/").endswith("/v1/models") and not self.headers.get("Authorization"):
                self._send(401, {"error": {"message": "no key", "type": "invalid_request_error"}})
            elif self.path.rstrip("/").endswith("/v1/models") and scenario in SCENARIOS:
                status = 500 if scenario == "error" else 200
                self._send(status, {"object": "list", "data": [{"id": f"fault-{scenario}", "object": "model"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            with state.lock:
                generation = state.generation
                state.in_flight[generation] += 1
                state.peak = max(state.peak, state.in_flight[generation])
            try:
                self._answer()
            finally:
                with state.lock:
                    state.in_flight[generation] -= 1

        def _answer(self) -> None:
            scenario = self.path.strip("/").split("/", 1)[0]
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with state.lock:
                state.attempts[scenario] += 1
                attempt = state.attempts[scenario]
                state.bodies.append({"scenario": scenario, **body})
            streamed = bool(body.get("stream"))
            if scenario == "error" or (scenario == "flaky" and attempt == 1) or (scenario == "midstream"
                                                                                 and not streamed):
                self._send(500, {"error": {"message": "the fault server failed on purpose", "type": "server_error"}})
            elif scenario == "trickle":
                self._trickle(streamed, body)
            elif scenario == "leaky":
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                self._send(401, {"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_api_key"}})
            elif scenario == "ratelimit":
                self._send(429, {"error": {"message": "slow down", "type": "rate_limit_error"}},
                           headers={"Retry-After": "1"})
            elif scenario == "cut" and streamed:
                self._stream(_chunks(body, state.reply, broken=False, cut=True), scenario, done=False)
            elif scenario in ("reset", "cut"):
                self._send(200, _completion(body, state.reply), cut=True)
            elif scenario in ("huge", "echo") and streamed:
                self._stream(_chunks(body, _odd(scenario, body, state.reply)[1]["choices"][0]["message"]["content"],
                                     broken=False))
            elif scenario == "eventless" and streamed:
                self._stream([{**chunk, "choices": []} for chunk in _chunks(body, state.reply, broken=False)])
            elif scenario == "eventless":
                self._send(*_odd("nochoices", body, state.reply))
            elif scenario in ("length", "filtered") and streamed:
                self._stream(_chunks(body, state.reply, broken=False,
                                     finish="length" if scenario == "length" else "content_filter"))
            elif scenario in ("unavailable", "nochoices", "null", "tools", "huge", "binary", "echo", "length", "parts",
                              "filtered"):
                self._send(*_odd(scenario, body, state.reply))
            elif scenario == "junk" and streamed:
                self._stream(_chunks(body, "  ...  ", broken=False))
            elif scenario == "junk":
                self._send(200, _completion(body, "  ...  "))
            elif scenario == "malformed":
                self._send(200, None, raw=b"this is not json")
            elif scenario == "html":
                self._send(200, None, raw=b"<html><body><h1>Welcome</h1></body></html>", content_type="text/html")
            elif scenario == "failed200":
                self._send(200, {"error": {"message": "the upstream provider is overloaded", "code": 502}})
            elif scenario == "shapeless":
                self._send(200, {"foo": 1})
            else:
                if scenario == "slow":
                    held = state.hold_from is not None and attempt >= state.hold_from
                    state.release.wait(HELD_S if held else state.delay)
                if streamed:
                    self._stream(_chunks(body, state.reply, broken=scenario == "midstream"), scenario,
                                 state.pace if scenario == "paced" else 0.0)
                else:
                    self._send(200, _completion(body, state.reply))

    return Handler
