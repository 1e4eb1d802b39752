"""A long soak of the real service: do memory, processes and Ray's logs settle under a steady mixed load?

Starts ``tessera serve`` (``serve/config.yaml``, 127.0.0.1, a free port, a key in ``$TESSERA_API_KEYS``, a private
``$TESSERA_HOME`` with a copy of the sample index, a private ``$TMPDIR`` for Ray's session), then N clients for M
minutes mix task-API searches, ``/v1/search``, OpenAI/Cohere embed and rerank, chat on the embedded model, uploads
into a new and a kept index, deletes, ``GET /tasks`` and bad requests (each must be a 4xx). Every ``--sample-s``:
RSS/USS of the service's processes by kind, task workers, Ray's session logs, the api replica's fds. At the end:
per kind first, last, MB/min over each half (settled: second half near 0), statuses and p50/p95 per route, 5xx,
timeouts and error lines in the logs; then the service is stopped and nothing of it may be left. Raw JSON: --out.

    nice -n 10 .venv/bin/python benchmarks/serve_soak.py --minutes 38 [--clients 4] [--out /tmp/serve-soak]
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
import numpy as np
import psutil
from _common import REPO_ROOT, latency_summary
from _serve import SAMPLE

KIND_PATTERNS = [  # (regex on the joined cmdline, kind); the first match wins
    (r"ray::ServeReplica:[^:]+:(\S+?)(\.[a-z_]+)?(\s|$)", r"replica:\1"), (r"ray::TaskWorker", "task_worker"),
    (r"ray::ServeController", "serve_controller"), (r"ray::ProxyActor", "serve_proxy"),
    (r"gcs_server", "gcs"), (r"/raylet ", "raylet"), (r"ray::DashboardAgent|dashboard/agent\.py", "dashboard_agent"),
    (r"dashboard/dashboard\.py", "dashboard"), (r"ray::RuntimeEnvAgent|runtime_env/agent", "runtime_env_agent"),
    (r"log_monitor\.py", "log_monitor"), (r"autoscaler/_private/monitor\.py", "autoscaler_monitor"),
    (r"ray\.serve\.scripts", "serve_run_driver"), (r"tessera serve", "tessera_cli"), (r"ray::IDLE", "idle_worker"),
    (r"ray::worker", "worker_starting"),
    (r"(ray::\w+)", r"\1"),
]
EXPECTED = {"upload_existing": {409, 429}, "upload_new": {409, 429}, "task_run_bm25": {429}, "enqueue_hybrid": {429},
            "delete_docs": {409}}  # 409: an ingestion into the kept index runs; 429: max_tasks_per_key


def kind_of(cmdline: str) -> str:
    """The process's kind by its cmdline (``ray::worker``: a worker between its actor's title and none, as it starts
    a task worker, seen as ``task_worker`` a sample later)."""
    for pattern, kind in KIND_PATTERNS:
        match = re.search(pattern, cmdline)
        if match:
            return match.expand(kind)
    return "other:" + Path(cmdline.split(" ")[0] or "?").name


def sample(root_pid: int, logs: Path, started: float, seen: dict[int, tuple[str, float]]) -> dict:
    """One sample of the service's process tree, its task workers, the api replica's fds and the logs folder;
    ``seen`` gets each process's kind and start time (pid reuse), for the check that none is left at the end."""
    kinds: dict[str, dict] = {}
    try:
        procs = [psutil.Process(root_pid)] + psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        procs = []
    for proc in procs:
        try:
            with proc.oneshot():
                cmdline = " ".join(proc.cmdline())
                kind = kind_of(cmdline)
                seen[proc.pid] = (kind, proc.create_time())
                row = kinds.setdefault(kind, {"n": 0, "rss_mb": 0.0, "uss_mb": 0.0, "pids": [], "cmd": cmdline[:200]})
                row["rss_mb"] += proc.memory_info().rss / 2**20
                row["uss_mb"] += proc.memory_full_info().uss / 2**20
                row["n"] += 1
                row["pids"].append(proc.pid)
                if kind == "replica:api":
                    row["fds"] = proc.num_fds()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    files = [p for p in logs.rglob("*") if p.is_file()] if logs.is_dir() else []
    return {"t_min": (time.monotonic() - started) / 60, "kinds": kinds,
            "logs_mb": sum(p.stat().st_size for p in files) / 2**20, "log_files": len(files),
            "worker_logs": sum(1 for p in files if p.name.startswith("worker-") and p.suffix == ".out"),
            "available_mb": psutil.virtual_memory().available / 2**20}


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
       "rerank_v2": 1, "chat": 2, "upload_existing": 1, "upload_new": 0.5, "delete_docs": 0.7, "list_tasks": 1,
       "bad_request": 1}


def slope(points: list[tuple[float, float]]) -> float:
    """MB per minute of a least-squares line through (minute, MB); NaN with fewer than 2 points."""
    if len(points) < 2:
        return float("nan")
    t, v = np.array(points).T
    return float(np.polyfit(t, v, 1)[0]) if np.ptp(t) > 0 else float("nan")


def series(samples: list[dict]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per kind its (minute, value) points of RSS, USS and processes; and the workers, logs and fds."""
    out: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for s in samples:
        t = s["t_min"]
        for kind, row in s["kinds"].items():
            for measure in ("rss_mb", "uss_mb", "n") + (("fds",) if "fds" in row else ()):
                out[kind if measure != "fds" else "api open fds"][measure].append((t, row[measure]))
        out["task workers alive"]["n"].append((t, s["kinds"].get("task_worker", {}).get("n", 0)))
        out["session logs MB (files)"]["rss_mb"].append((t, s["logs_mb"]))
        out["session logs MB (files)"]["n"].append((t, s["log_files"]))
    return out


def report(soak: Soak, samples: list[dict], minutes: float) -> None:
    half = samples[-1]["t_min"] / 2
    print(f"\n{'kind (MB: RSS; /min: per minute)':<36}{'n':>7}{'first':>8}{'last':>8}{'1st half':>10}{'2nd half':>10}"
          f"{'USS 2nd':>9}")
    for name, measures in sorted(series(samples).items()):
        values = measures.get("rss_mb") or measures.get("fds") or measures["n"]
        n = measures.get("n", [(0, 0)])
        halves = [slope([p for p in values if p[0] <= half]), slope([p for p in values if p[0] >= half]),
                  slope([p for p in measures.get("uss_mb", []) if p[0] >= half])]
        print(f"{name[:35]:<36}{f'{n[0][1]:.0f}-{n[-1][1]:.0f}':>7}{values[0][1]:>8.1f}{values[-1][1]:>8.1f}"
              + "".join(f"{h:>10.2f}" for h in halves[:2]) + f"{halves[2]:>9.2f}")
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
            text = path.read_text("utf-8", errors="replace")
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
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="soak-", dir="/tmp"))
    (home / "t").mkdir()
    env = {**os.environ, "TESSERA_HOME": str(home), "TMPDIR": str(home / "t"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TESSERA_API_KEYS": (key := secrets.token_urlsafe(24))}
    source = subprocess.run([sys.executable, "-c", "from _serve import sample_index; print(sample_index())"],
                            cwd=Path(__file__).parent, env=env, check=True, capture_output=True, text=True)
    index = home / "indices" / "sample"  # a copy of the demo's, else of one ingested once into the benchmarks' cache
    shutil.copytree(source.stdout.strip().splitlines()[-1], index)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{(port := sock.getsockname()[1])}"
    log_path = home / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("tessera")), "serve",
                                 "--host", "127.0.0.1", "--port", str(port), "--index", str(index)],
                                cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    print(f"tessera serve pid {proc.pid} on {base}; TESSERA_HOME {home}; log {log_path}", flush=True)
    samples: list[dict] = []
    seen: dict[int, tuple[str, float]] = {}
    logs = home / "t" / "ray" / "session_latest" / "logs"
    try:
        print(f"ready after {wait_ready(base, proc):.0f} s", flush=True)
        logs = logs.resolve()  # the session's own folder, not the link
        soak = Soak(base, key, 0.0, args.max_tokens)
        asyncio.run(warm_up(soak))
        soak = Soak(base, key, time.monotonic() + args.minutes * 60, args.max_tokens)
        started = time.monotonic()
        stop = threading.Event()

        def sampler() -> None:
            while True:
                samples.append(last := sample(proc.pid, logs, started, seen))
                api, workers = last["kinds"].get("replica:api", {}), last["kinds"].get("task_worker", {})
                print(f"[{last['t_min']:5.1f} min] api {api.get('rss_mb', 0):.0f} MB, {api.get('fds')} fds; "
                      f"task workers {workers.get('n', 0)}; logs {last['logs_mb']:.1f} MB; requests "
                      f"{sum(map(len, soak.seconds.values()))}; problems {len(soak.problems)}", flush=True)
                if stop.wait(args.sample_s):
                    return

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        asyncio.run(run_clients(soak, args.clients))
        stop.set()
        thread.join()
        samples.append(sample(proc.pid, logs, started, seen))  # after the last request
        minutes = (time.monotonic() - started) / 60
        report(soak, samples, minutes)
        errors = error_lines([log_path, *sorted(logs.glob("serve/*.log")), *sorted(logs.glob("*.err"))])
        print(f"\nerror-looking lines in serve output, logs/serve/*.log and logs/*.err: {len(errors)} distinct\n  "
              + "\n  ".join(errors))
        result = {"minutes": minutes, "clients": args.clients, "samples": samples, "problems": soak.problems,
                  "outcomes": {k: dict(v) for k, v in soak.outcomes.items()}, "error_lines": errors,
                  "latency": {k: latency_summary(v) for k, v in soak.seconds.items()}}
    finally:
        sample(proc.pid, logs, time.monotonic(), seen)  # what runs now, also after a failure
        left = stop_service(proc, seen)
        print(f"stopped: tessera serve exit {proc.returncode}; processes left behind: {left or 'none'}")
    result["left_behind"] = left
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1))
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
