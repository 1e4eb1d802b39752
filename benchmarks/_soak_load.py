"""What benchmarks/serve_soak.py's clients send: the kinds of requests (:data:`MIX`, weighted), each timed and its
outcome counted per kind, with whatever looked wrong (5xx, timeouts, an unexpected status, a task that failed or
never ended) kept as a problem."""

from __future__ import annotations

import asyncio
import collections
import json
import random
import time

import httpx
from _serve import SAMPLE

#: Kinds of requests and their weights; ``--only`` picks some of them.
MIX = {"task_run_bm25": 3, "enqueue_hybrid": 2, "task_cancel": 1, "search_bm25": 2, "search_dense": 2,
       "search_hybrid": 3, "embeddings": 2, "embed_v2": 1, "rerank_v1": 2, "rerank_v2": 1, "chat": 0.5,
       "chat_stream": 0.3, "rag": 0.3, "rag_stream": 0.3, "cut_stream": 0.5, "cut_rag": 0.3, "upload_existing": 1,
       "upload_new": 0.5, "doc_get": 1, "doc_list": 0.5, "delete_docs": 0.7, "list_tasks": 1, "flows": 1,
       "healthz": 1, "bad_request": 1, "bad_json": 0.5, "not_found": 0.5, "too_large": 0.3}
#: Statuses a kind may also get besides its ``ok`` ones: 409: an ingestion into the kept index runs, or the task
#: ended before its cancel; 429: max_tasks_per_key.
EXPECTED = {"upload_existing": {409, 429}, "upload_new": {409, 429}, "task_run_bm25": {429}, "enqueue_hybrid": {429},
            "task_cancel": {429}, "cancel": {409}, "delete_docs": {409}}
BODY_LIMIT = 1_000_000  # serve/config.yaml's max_body_bytes: one byte more is a 413


class Soak:
    """The clients' shared state: the base URL, queries and texts, ids to delete, and per-route outcomes."""

    def __init__(self, base: str, key: str, deadline: float, max_tokens: int):
        self.base, self.deadline, self.max_tokens = base, deadline, max_tokens
        self.headers = {"Authorization": f"Bearer {key}"}
        self.queries = [json.loads(line)["text"] for line in open(SAMPLE / "queries.jsonl", encoding="utf-8")]
        self.texts = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text("utf-8").splitlines()[:200]]
        self.uploaded: list[str] = []  # ids in the kept index, for deletes and fetches
        self.seconds: dict[str, list[float]] = collections.defaultdict(list)
        self.outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.problems: list[dict] = []  # 5xx, timeouts, unexpected statuses, stuck tasks
        self.serial = 0

    def requests(self) -> int:
        return sum(map(len, self.seconds.values()))

    def docs(self, rng: random.Random, n: int) -> list[dict]:
        self.serial += n
        return [{"id": f"soak-{self.serial - i}", "title": d.get("title", ""), "text": d["text"][:1200]}
                for i, d in enumerate(rng.sample(self.texts, n))]

    def count(self, route: str, url: str, started: float, response: httpx.Response | None, outcome, ok) -> None:
        """The request's time and outcome under ``route``; a problem unless its status is one ``route`` expects."""
        self.seconds[route].append(time.perf_counter() - started)
        self.outcomes[route][str(outcome)] += 1
        bad = (route == "bad_request" and not (isinstance(outcome, int) and 400 <= outcome < 500)) or (
            route != "bad_request" and outcome not in ok and outcome not in EXPECTED.get(route, ()))
        if bad:
            self.problems.append({"route": route, "url": url, "outcome": outcome, "at": time.strftime("%H:%M:%S"),
                                  "request_id": response.headers.get("x-request-id") if response else None,
                                  "body": response.text[:300] if response is not None else None})

    async def call(self, http, route: str, method: str, url: str, ok=(200,), **kw):
        """One timed request, its outcome counted under ``route``; the response, or None on no answer."""
        started = time.perf_counter()
        try:
            response = await http.request(method, url, **kw)
            outcome = response.status_code
        except httpx.HTTPError as err:
            response, outcome = None, type(err).__name__
        self.count(route, url, started, response, outcome, ok)
        return response

    async def cut(self, http, route: str, body: dict) -> None:
        """A streamed chat whose client closes the connection once the first bytes came (a client gone mid-stream)."""
        started, url = time.perf_counter(), "/v1/chat/completions"
        try:
            async with http.stream("POST", url, json=body) as response:
                async for _ in response.aiter_raw():
                    break
            self.count(route, url, started, None, response.status_code, (200,))
        except httpx.HTTPError as err:
            self.count(route, url, started, None, type(err).__name__, (200,))

    async def wait_task(self, http, task_id: str, route: str, limit_s: float = 300,
                        ends=("finished",)) -> dict | None:
        """Polls the task's progress until it ends (a problem unless it ends as ``ends``; also one that never ends)."""
        for _ in range(int(limit_s * 2)):
            response = await self.call(http, "progress", "GET", f"/task/progress/{task_id}")
            if response is not None and response.status_code == 200 and response.json().get("has_finished"):
                body = response.json()
                if body.get("status") not in ends:
                    self.problems.append({"route": route, "task": task_id, "status": body.get("status"),
                                          "error": str(body.get("error"))[:300]})
                return body
            await asyncio.sleep(0.5)
        self.problems.append({"route": route, "task": task_id, "outcome": f"not finished after {limit_s:.0f} s"})

    def chat(self, model: str, query: str, stream: bool = False) -> dict:
        return {"model": model, "max_tokens": self.max_tokens, "stream": stream,
                "messages": [{"role": "user", "content": query}]}

    async def step(self, http, rng: random.Random, client: int, action: str) -> None:
        query = rng.choice(self.queries)
        if action == "task_run_bm25":
            r = await self.call(http, action, "POST", "/task/run", json={"flow": "bm25", "query": query, "top_k": 5})
            if r is not None and r.status_code == 200 and rng.random() < 0.5:
                await self.call(http, "delete_task", "DELETE", f"/task/{r.json()['task_id']}")
        elif action == "enqueue_hybrid":
            r = await self.call(http, action, "POST", "/task/enqueue", json={"flow": "hybrid", "query": query})
            if r is not None and r.status_code == 200:
                await self.wait_task(http, r.text, action)
        elif action == "task_cancel":
            r = await self.call(http, action, "POST", "/task/enqueue", json={"flow": "hybrid", "query": query})
            if r is not None and r.status_code == 200:
                await self.call(http, "cancel", "GET", f"/task/cancel/{r.text}")
                await self.wait_task(http, r.text, action, ends=("finished", "cancelled"))
                await self.call(http, "delete_task", "DELETE", f"/task/{r.text}")
        elif action.startswith("search_"):
            await self.call(http, action, "POST", "/v1/search", json={"flow": action[7:], "query": query, "top_k": 5})
        elif action == "embeddings":
            await self.call(http, action, "POST", "/v1/embeddings", json={"model": "minilm", "input": [query] * 3})
        elif action == "embed_v2":
            await self.call(http, action, "POST", "/v2/embed", json={"model": "minilm", "input_type": "search_query",
                                                                     "texts": [query], "embedding_types": ["float"]})
        elif action in ("rerank_v1", "rerank_v2"):
            docs = [d["text"][:400] for d in rng.sample(self.texts, 8)]
            url = "/v1/rerank" if action == "rerank_v1" else "/v2/rerank"
            await self.call(http, action, "POST", url, json={"model": "minilm-rerank", "query": query,
                                                             "documents": docs, "top_n": 3})
        elif action in ("chat", "chat_stream", "rag", "rag_stream"):
            model = "rag" if action.startswith("rag") else "smollm2"
            await self.call(http, action, "POST", "/v1/chat/completions",
                            json=self.chat(model, query, action.endswith("_stream")))
        elif action in ("cut_stream", "cut_rag"):
            await self.cut(http, action, self.chat("rag" if action == "cut_rag" else "smollm2", query, True))
        elif action in ("upload_existing", "upload_new", "doc_get", "doc_list", "delete_docs"):
            await self.documents(http, rng, client, action, query)
        elif action == "flows":
            await self.call(http, action, "GET", "/flows")
        elif action == "healthz":
            await self.call(http, action, "GET", "/healthz")
        elif action == "list_tasks":
            await self.call(http, action, "GET", "/tasks", params={"limit": 20})
        elif action == "bad_json":
            await self.call(http, action, "POST", "/v1/search", ok=(422,), content=b'{"flow": "bm25", "query": ',
                            headers={"Content-Type": "application/json"})
        elif action == "not_found":
            url = rng.choice(["/no/such/route", "/v1/indices/soak-kept/documents/no-such"])
            await self.call(http, action, "GET", url, ok=(404,))
        elif action == "too_large":
            await self.call(http, action, "POST", "/v1/search", ok=(413,),
                            json={"flow": "bm25", "query": "x" * (BODY_LIMIT + 1)})
        else:
            await self.bad_request(http, rng, query)

    async def documents(self, http, rng: random.Random, client: int, action: str, query: str) -> None:
        """Uploads into the kept index and a new one (searched, then deleted), and the kept one's documents fetched,
        listed and deleted (the newest 4 stay, for the fetches)."""
        if action == "upload_existing":
            docs = self.docs(rng, 2)
            r = await self.call(http, action, "POST", "/v1/indices/soak-kept/documents", ok=(202,),
                                json={"documents": docs})
            if r is not None and r.status_code == 202 and await self.wait_task(http, r.json()["task_id"], action):
                self.uploaded += [d["id"] for d in docs]
        elif action == "upload_new":
            name = f"soak-new-{client}-{self.serial}"
            r = await self.call(http, action, "POST", f"/v1/indices/{name}/documents", ok=(202,),
                                json={"documents": self.docs(rng, 2)})
            if r is not None and r.status_code == 202:
                await self.wait_task(http, r.json()["task_id"], action)
                await self.call(http, "search_new", "POST", "/v1/search",
                                json={"flow": "bm25", "query": query, "index": name, "top_k": 3})
                await self.call(http, "delete_index", "DELETE", f"/v1/indices/{name}")
        elif action == "doc_get":
            if self.uploaded:  # the newest 4, which no delete takes
                doc = rng.choice(self.uploaded[-4:])
                await self.call(http, action, "GET", f"/v1/indices/soak-kept/documents/{doc}")
        elif action == "doc_list":
            await self.call(http, action, "GET", "/v1/indices/soak-kept/documents", params={"limit": 10})
        else:
            ids = [self.uploaded.pop(0) for _ in range(min(2, len(self.uploaded) - 4))] or ["never-uploaded"]
            await self.call(http, action, "POST", "/v1/indices/soak-kept/delete", json={"ids": ids})

    async def bad_request(self, http, rng: random.Random, query: str) -> None:
        method, url, kw = rng.choice([
            ("POST", "/v1/search", {"json": {"flow": "bm25", "query": "   "}}), ("GET", "/tasks?limit=0", {}),
            ("POST", "/v1/embeddings", {"json": {"model": "no-such-model", "input": query}}),
            ("GET", "/task/progress/no-such-task", {}), ("GET", "/tasks", {"headers": {"Authorization": "Bearer x"}}),
            ("POST", "/v1/rerank", {"json": {"model": "minilm-rerank", "documents": ["a"]}}),
            ("POST", "/v1/indices/-bad-name/documents", {"json": {"documents": [{"id": "x", "text": "y"}]}}),
            ("POST", "/v1/chat/completions", {"json": {"model": "smollm2", "messages": []}})])
        await self.call(http, "bad_request", method, url, **kw)

    async def client(self, client: int, mix: dict[str, float]) -> None:
        rng = random.Random(client)
        actions, weights = list(mix), list(mix.values())
        async with httpx.AsyncClient(base_url=self.base, headers=self.headers, timeout=180) as http:
            while time.monotonic() < self.deadline:
                await self.step(http, rng, client, rng.choices(actions, weights)[0])
