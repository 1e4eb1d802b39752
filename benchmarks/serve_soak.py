"""A long soak of the real service: do memory, processes and Ray's logs settle under a steady mixed load?

Starts ``tessera serve`` (``serve/config.yaml``, 127.0.0.1, a free port, a key in ``$TESSERA_API_KEYS``, a private
``$TESSERA_HOME`` with a copy of the sample index, a private ``$TMPDIR`` for Ray's session), then N clients for M
minutes mix task-API searches, ``/v1/search``, OpenAI/Cohere embed and rerank, chat on the embedded model, uploads
into a new and a kept index, deletes, ``GET /tasks``, ``GET /flows``, ``/healthz`` and bad requests (each must be a
4xx). It serves a copy of HEAD (``--tree head``), so edits in the tree do not reach it. Every ``--sample-s``
(benchmarks/_soak_probe.py): RSS/USS of each process of the service's own tree by kind (GCS, raylet, agents, Serve
controller and proxy, each deployment's replicas, task workers), its Ray session folder (logs, spilled objects), the
task store's size, the api replica's fds. At the end: per kind, after ``--warmup-min``, first and last and the slopes in
MB per minute and per 1,000 requests; statuses and p50/p95 per route, 5xx, timeouts and error lines in the logs; then
the service is stopped and nothing of it may be left. Raw JSON: --out.

    nice -n 10 .venv/bin/python benchmarks/serve_soak.py --minutes 35 [--clients 4] [--port 0] [--out /tmp/serve-soak]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
from _common import REPO_ROOT, latency_summary
from _soak_probe import growth_table, sample
from _serve import SAMPLE

EXPECTED = {"upload_existing": {409, 429}, "upload_new": {409, 429}, "task_run_bm25": {429}, "enqueue_hybrid": {429},
            "delete_docs": {409}}  # 409: an ingestion into the kept index runs; 429: max_tasks_per_key


class Soak:
    """The clients' shared state: the base URL, queries and texts, ids to delete, and per-route outcomes."""

    def __init__(self, base: str, key: str, deadline: float, max_tokens: int):
        self.base, self.deadline, self.max_tokens = base, deadline, max_tokens
        self.headers = {"Authorization": f"Bearer {key}"}
        self.queries = [json.loads(line)["text"] for line in open(SAMPLE / "queries.jsonl", encoding="utf-8")]
        self.texts = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text("utf-8").splitlines()[:200]]
        self.uploaded: list[str] = []  # ids in the kept index, for deletes
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

    async def call(self, http, route: str, method: str, url: str, ok=(200,), **kw):
        """One timed request, its outcome counted under ``route``; the response, or None on no answer."""
        started = time.perf_counter()
        try:
            response = await http.request(method, url, **kw)
            outcome = response.status_code
        except httpx.HTTPError as err:
            response, outcome = None, type(err).__name__
        self.seconds[route].append(time.perf_counter() - started)
        self.outcomes[route][str(outcome)] += 1
        bad = (route == "bad_request" and not (isinstance(outcome, int) and 400 <= outcome < 500)) or (
            route != "bad_request" and outcome not in ok and outcome not in EXPECTED.get(route, ()))
        if bad:
            self.problems.append({"route": route, "url": url, "outcome": outcome, "at": time.strftime("%H:%M:%S"),
                                  "request_id": response.headers.get("x-request-id") if response else None,
                                  "body": response.text[:300] if response is not None else None})
        return response

    async def wait_task(self, http, task_id: str, route: str, limit_s: float = 300) -> dict | None:
        """Polls the task's progress until it ends (a problem unless it finished; also one that never ends)."""
        for _ in range(int(limit_s * 2)):
            response = await self.call(http, "progress", "GET", f"/task/progress/{task_id}")
            if response is not None and response.status_code == 200 and response.json().get("has_finished"):
                body = response.json()
                if body.get("status") != "finished":
                    self.problems.append({"route": route, "task": task_id, "status": body.get("status"),
                                          "error": str(body.get("error"))[:300]})
                return body
            await asyncio.sleep(0.5)
        self.problems.append({"route": route, "task": task_id, "outcome": f"not finished after {limit_s:.0f} s"})

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
        elif action == "search_hybrid":
            await self.call(http, action, "POST", "/v1/search", json={"flow": "hybrid", "query": query, "top_k": 5})
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
        elif action == "chat":
            await self.call(http, action, "POST", "/v1/chat/completions", json={
                "model": "smollm2", "max_tokens": self.max_tokens, "messages": [{"role": "user", "content": query}]})
        elif action == "upload_existing":
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
        elif action == "delete_docs":
            ids = [self.uploaded.pop(0) for _ in range(min(2, len(self.uploaded)))] or ["never-uploaded"]
            await self.call(http, action, "POST", "/v1/indices/soak-kept/delete", json={"ids": ids})
        elif action == "flows":
            await self.call(http, action, "GET", "/flows")
        elif action == "healthz":
            await self.call(http, action, "GET", "/healthz")
        elif action == "list_tasks":
            await self.call(http, action, "GET", "/tasks", params={"limit": 20})
        else:
            await self.bad_request(http, rng, query)

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


MIX = {"task_run_bm25": 3, "enqueue_hybrid": 2, "search_hybrid": 3, "embeddings": 2, "embed_v2": 1, "rerank_v1": 2,
       "rerank_v2": 1, "chat": 0.5, "upload_existing": 1, "upload_new": 0.5, "delete_docs": 0.7, "list_tasks": 1,
       "flows": 1, "healthz": 1, "bad_request": 1}


def report(soak: Soak, samples: list[dict], minutes: float, warmup_min: float) -> None:
    print("\n" + "\n".join(growth_table(samples, warmup_min)))
    total = sum(len(v) for v in soak.seconds.values())
    print(f"\n{total} requests in {minutes:.1f} min; per route (statuses, p50/p95 ms):")
    for route in sorted(soak.seconds):
        s = latency_summary(soak.seconds[route])
        print(f"  {route:<16}{len(soak.seconds[route]):>6}  p50 {s['p50_ms']:8.0f}  p95 {s['p95_ms']:8.0f}  "
              f"{dict(soak.outcomes[route])}")
    print(f"statuses: {dict(sum(soak.outcomes.values(), collections.Counter()))}")
    fives = [p for p in soak.problems if str(p.get("outcome", "")).startswith("5")]
    timeouts = [p for p in soak.problems if "Timeout" in str(p.get("outcome", ""))]
    print(f"5xx: {len(fives)}; timeouts: {len(timeouts)}; problems in all: {len(soak.problems)}")
    for problem in soak.problems[:15]:
        print(f"  {json.dumps(problem)[:400]}")


def error_lines(paths: list[Path], limit: int = 12) -> list[str]:
    """Distinct ERROR / Traceback lines of the given logs, ids and numbers masked, the most frequent first."""
    seen: collections.Counter = collections.Counter()
    for path in paths:
        try:
            text = path.read_text("utf-8", errors="replace", encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            if re.search(r"\bERROR\b|Traceback|Exception|\bCRITICAL\b", line):
                seen[re.sub(r"[0-9a-f]{8,}|\d+", "N", line.strip())[:220]] += 1
    return [f"{n:>5} x {line}" for line, n in seen.most_common(limit)]


def stop_service(proc: subprocess.Popen, seen: dict[int, tuple[str, float]]) -> list[str]:
    """SIGINT to ``tessera serve`` (it stops Serve and Ray), then whatever of ``seen`` (pid: create time) is left
    after 60 s is listed and killed by pid."""
    proc.send_signal(signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=90)
    time.sleep(5)
    left = []
    for pid, (_, created) in seen.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid} {' '.join(p.cmdline())[:100]}")
                p.kill()
        except psutil.NoSuchProcess:
            pass
    return left


def wait_ready(base: str, proc: subprocess.Popen, limit_s: float = 900) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if proc.poll() is not None:
            raise SystemExit(f"tessera serve exited with {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(3)
    raise SystemExit(f"not ready after {limit_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5, help="how long the clients send")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients")
    parser.add_argument("--sample-s", type=float, default=60, help="seconds between samples")
    parser.add_argument("--max-tokens", type=int, default=8, help="max_tokens of each chat")
    parser.add_argument("--out", type=Path, default=Path("/tmp/serve-soak"), help="folder for the raw JSON")
    parser.add_argument("--keep-home", action="store_true", help="leave the temp TESSERA_HOME (logs) in place")
    parser.add_argument("--port", type=int, default=0, help="the service's port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--warmup-min", type=float, default=5, help="minutes left out of the growth slopes")
    parser.add_argument("--tree", choices=("head", "work"), default="head",
                        help="serve a copy of the commit checked out (head: edits under way in the tree cannot "
                             "reach a worker mid-soak) or the working tree itself")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="soak-", dir="/tmp"))
    (home / "t").mkdir()
    env = {**os.environ, "TESSERA_HOME": str(home), "TMPDIR": str(home / "t"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TESSERA_API_KEYS": (key := secrets.token_urlsafe(24))}
    source = subprocess.run([sys.executable, "-c", "from _serve import sample_index; print(sample_index())"],
                            cwd=Path(__file__).parent, env=env, check=True, capture_output=True, text=True)
    index = home / "indices" / "sample"  # a copy of the demo's, else of one ingested once into the benchmarks' cache
    shutil.copytree(source.stdout.strip().splitlines()[-1], index)
    cwd = REPO_ROOT
    if args.tree == "head":  # PYTHONPATH comes before the venv's editable finder, in every Ray worker too
        cwd = home / "tree"
        cwd.mkdir()
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPO_ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(cwd)], input=archive, check=True)
        env["PYTHONPATH"] = str(cwd)
    port = args.port
    if not port:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    log_path = home / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("tessera")), "serve",
                                 "--host", "127.0.0.1", "--port", str(port), "--index", str(index)],
                                cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    print(f"tessera serve pid {proc.pid} on {base}; TESSERA_HOME {home}; log {log_path}", flush=True)
    samples: list[dict] = []
    seen: dict[int, tuple[str, float]] = {}
    session = home / "t" / "ray" / "session_latest"
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        print(f"ready after {wait_ready(base, proc):.0f} s", flush=True)
        session = session.resolve()  # the session's own folder, not the link
        logs = session / "logs"
        soak = Soak(base, key, 0.0, args.max_tokens)
        asyncio.run(warm_up(soak))
        soak = Soak(base, key, time.monotonic() + args.minutes * 60, args.max_tokens)
        started = time.monotonic()
        stop = threading.Event()

        def sampler() -> None:
            while True:
                samples.append(last := sample(proc.pid, session, home, started, soak.requests(), seen))
                api, workers = last["kinds"].get("replica:api", {}), last["kinds"].get("task_worker", {})
                print(f"[{last['t_min']:5.1f} min] api {api.get('rss_mb', 0):.0f} MB, {api.get('fds')} fds; "
                      f"task workers {workers.get('n', 0)}; gcs {last['kinds'].get('gcs', {}).get('rss_mb', 0):.0f} "
                      f"MB; logs "
                      f"{last['logs_mb']:.1f} MB; store {last['task_store_mb']:.1f} MB; requests "
                      f"{sum(map(len, soak.seconds.values()))}; problems {len(soak.problems)}", flush=True)
                # kept should the run fail later
                (args.out / "live.json").write_text(json.dumps(samples), encoding="utf-8")
                if stop.wait(args.sample_s):
                    return

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        asyncio.run(run_clients(soak, args.clients))
        stop.set()
        thread.join()
        samples.append(sample(proc.pid, session, home, started, soak.requests(), seen))  # the last
        minutes = (time.monotonic() - started) / 60
        report(soak, samples, minutes, args.warmup_min)
        errors = error_lines([log_path, *sorted(logs.glob("serve/*.log")), *sorted(logs.glob("*.err"))])
        print(f"\nerror-looking lines in serve output, logs/serve/*.log and logs/*.err: {len(errors)} distinct\n  "
              + "\n  ".join(errors))
        result = {"minutes": minutes, "clients": args.clients, "samples": samples, "problems": soak.problems,
                  "outcomes": {k: dict(v) for k, v in soak.outcomes.items()}, "error_lines": errors,
                  "latency": {k: latency_summary(v) for k, v in soak.seconds.items()}}
    finally:
        sample(proc.pid, session, home, time.monotonic(), 0, seen)  # what runs now, also after a failure
        left = stop_service(proc, seen)
        print(f"stopped: tessera serve exit {proc.returncode}; processes left behind: {left or 'none'}")
    result["left_behind"] = left
    result["command"] = sys.argv
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"raw samples: {out}")
    if not args.keep_home:
        shutil.rmtree(home, ignore_errors=True)


async def warm_up(soak: Soak) -> None:
    """Each action once, in order, untimed in the soak's figures; the kept index is made here."""
    rng = random.Random(-1)
    async with httpx.AsyncClient(base_url=soak.base, headers=soak.headers, timeout=600) as http:
        for action in MIX:
            await soak.step(http, rng, -1, action)
    print(f"warm-up: {dict((k, dict(v)) for k, v in soak.outcomes.items())}; problems {soak.problems}", flush=True)


async def run_clients(soak: Soak, clients: int) -> None:
    await asyncio.gather(*(soak.client(n, MIX) for n in range(clients)))


if __name__ == "__main__":
    main()
