"""A small MOSAIC-compatible search service for sources.mosaic's tests, on 127.0.0.1 and a free port.

It answers MOSAIC's three routes over real corpora, searched with BM25 (bm25s):
``/search?q=&index=&lang=&limit=`` -> ``{"results": [{index: [{id, url, title, textSnippet,
language, warcDate, wordCount}]}]}`` (one list per index when no index is given; 404 for an
index it does not have), ``/full-text?id=`` -> the plain text (UTF-8, no charset in its
``Content-Type``: the client must not fall back to Latin-1), ``/index-info`` ->
``{"results": [{index: {documentCount, languages}}]}``. The first path segment picks a
scenario: ``ok``, ``slow`` (searches answer after 1 s), ``error500`` (searches fail),
``flaky`` (each query's first search answers 503), ``fulltext500`` (full texts fail).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from operators.testing import SAMPLE_CORPUS


class MosaicServer:
    """The corpora, their BM25 indices, and what was asked (``hits[(scenario, route)]``)."""

    def __init__(self, corpora: dict[str, Path]) -> None:
        import bm25s
        import Stemmer

        self.docs: dict[str, list[dict]] = {}
        self.retrievers = {}
        self.stemmer = Stemmer.Stemmer("english")
        for name, path in corpora.items():
            with open(path, encoding="utf-8") as f:
                docs = [json.loads(line) for line in f]
            self.docs[name] = docs
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize([f"{d.get('title', '')} {d['text']}" for d in docs], stopwords="en",
                                           stemmer=self.stemmer, show_progress=False), show_progress=False)
            self.retrievers[name] = retriever
        self.by_id = {d["_id"]: d for docs in self.docs.values() for d in docs}
        self.hits: Counter = Counter()
        self.flaky_seen: set[str] = set()
        self.port = 0

    def url(self, scenario: str = "ok") -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}"

    def search(self, index: str, query: str, limit: int) -> list[dict]:
        import bm25s

        docs = self.docs[index]
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False)
        ids, scores = self.retrievers[index].retrieve(tokens, k=min(limit, len(docs)), show_progress=False)
        return [self._result(index, docs[i]) for i, s in zip(ids[0], scores[0]) if s > 0]

    @staticmethod
    def _result(index: str, doc: dict) -> dict:
        return {"id": doc["_id"], "url": f"https://{index}.example.org/{doc['_id']}", "title": doc.get("title"),
                "textSnippet": doc["text"][:120], "language": "en", "warcDate": "2025-03-01T00:00:00Z",
                "wordCount": len(doc["text"].split())}


def _handler(server: MosaicServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _answer(self, status: int, body, content_type: str = "application/json") -> None:
            data = (json.dumps(body) if content_type == "application/json" else body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        def do_GET(self):  # noqa: N802
            parts = urlsplit(self.path)
            scenario, _, route = parts.path.strip("/").partition("/")
            args = {k: v[0] for k, v in parse_qs(parts.query).items()}
            server.hits[(scenario, route)] += 1
            if route == "index-info":
                return self._answer(200, {"results": [{name: {"documentCount": len(docs), "languages": ["en"]}}
                                                      for name, docs in server.docs.items()]})
            if route == "full-text":
                if scenario == "fulltext500":
                    return self._answer(500, {"error": "full-text store unavailable"})
                doc = server.by_id.get(args.get("id", ""))
                return self._answer(200, doc["text"], "text/plain") if doc else \
                    self._answer(404, {"error": f"no document {args.get('id')}"})
            if route != "search":
                return self._answer(404, {"error": f"no route {route}"})
            if scenario == "slow":
                time.sleep(1.0)
            if scenario == "error500":
                return self._answer(500, {"error": "search backend crashed"})
            if scenario == "flaky" and args.get("q") not in server.flaky_seen:
                server.flaky_seen.add(args.get("q"))
                return self._answer(503, {"error": "warming up"})
            if not args.get("q"):
                return self._answer(400, {"error": "parameter q is required"})
            index = args.get("index")
            if index is not None and index not in server.docs:
                return self._answer(404, {"error": f"index '{index}' not found"})
            limit = int(args.get("limit", 10))
            names = [index] if index else list(server.docs)
            wanted = args.get("lang")
            return self._answer(200, {"results": [
                {name: server.search(name, args["q"], limit) if wanted in (None, "en") else []} for name in names]})

    return Handler


class _Server(ThreadingHTTPServer):
    """A listen backlog for the operator's full-text requests (8 at once by default): with socketserver's 5, the
    connections past it were dropped and made again after TCP's 1 s retransmission timeout (about 1 s a test)."""

    request_queue_size = 64


@pytest.fixture(scope="module")
def start_mosaic():
    """A function: start a MOSAIC-compatible server over ``{index: corpus.jsonl}``; stopped after the module."""
    running = []

    def start(corpora: dict[str, Path]) -> MosaicServer:
        state = MosaicServer(corpora)
        httpd = _Server(("127.0.0.1", 0), _handler(state))
        httpd.daemon_threads = True
        state.port = httpd.server_address[1]
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        running.append((httpd, thread))
        return state

    yield start
    for httpd, thread in running:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def sample_mosaic(start_mosaic) -> MosaicServer:
    """The server over the bundled Wikipedia sample (in the repository: no ../shared/data needed)."""
    return start_mosaic({"simplewiki": SAMPLE_CORPUS})
