"""A bounded loopback load: N concurrent clients for S seconds mixing ``/v1/search``, ``/task/enqueue`` and
``/task/progress`` on the real app; prints errors, requests/s and p50/p95 per route.

Starts the app (``serve.app:build_app``: the flow routes over the sample index, a task store in a temp folder,
no model deployments) on 127.0.0.1 with one API key. Each client (``httpx.AsyncClient``) loops until the time is
up, picking a route by the mix: a search (``--flow``, top 10, a sample query), an enqueue of the same flow, or
the progress of a task it (or another client) enqueued. A task runs on its own Ray actor, so the key's
``max_tasks_per_key`` bounds the actors alive at once: an enqueue over it is the designed 429, counted apart
from the errors (any other non-2xx answer, or no answer within the timeout).

    nice -n 10 .venv/bin/python benchmarks/serve_load.py [--clients 50] [--seconds 60] [--flow bm25]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import secrets
import time
from pathlib import Path

from _common import latency_summary
from _serve import SAMPLE, sample_index, serve_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROUTES = ("search", "enqueue", "progress")


class Load:
    """What the clients share: the base URL, the queries, task ids, and per-route latencies and outcomes."""

    def __init__(self, base: str, key: str, flow: str, mix: list[float], deadline: float):
        self.base, self.flow, self.mix, self.deadline = base, flow, mix, deadline
        self.headers = {"Authorization": f"Bearer {key}"}
        self.queries = [json.loads(line)["text"] for line in (SAMPLE / "queries.jsonl").read_text("utf-8").splitlines()]
        self.tasks: list[str] = []
        self.seconds: dict[str, list[float]] = collections.defaultdict(list)
        self.outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)

    async def client(self, seed: int) -> None:
        import httpx

        rng = random.Random(seed)
        async with httpx.AsyncClient(base_url=self.base, headers=self.headers, timeout=120) as http:
            while time.monotonic() < self.deadline:
                route = rng.choices(ROUTES, weights=self.mix)[0]
                if route == "progress" and not self.tasks:
                    route = "search"
                body = {"flow": self.flow, "query": rng.choice(self.queries)}
                started = time.perf_counter()
                try:
                    if route == "search":
                        response = await http.post("/v1/search", json={**body, "top_k": 10})
                    elif route == "enqueue":
                        response = await http.post("/task/enqueue", json=body)
                        if response.status_code == 200:
                            self.tasks.append(response.text)
                    else:
                        response = await http.get(f"/task/progress/{rng.choice(self.tasks[-200:])}")
                    outcome = str(response.status_code)
                except httpx.HTTPError as err:
                    outcome = type(err).__name__
                self.seconds[route].append(time.perf_counter() - started)
                self.outcomes[route][outcome] += 1

    def report(self, seconds: float) -> int:
        """Print the totals and each route's figures; the number of errors."""
        total = sum(len(v) for v in self.seconds.values())
        errors = {route: {o: n for o, n in counts.items() if o != "200" and not (route == "enqueue" and o == "429")}
                  for route, counts in self.outcomes.items()}
        count = sum(sum(e.values()) for e in errors.values())
        print(f"{total} requests in {seconds:.1f} s: {total / seconds:.1f} requests/s; errors: {count} "
              f"{json.dumps({r: e for r, e in errors.items() if e})}")
        for route in ROUTES:
            if self.seconds[route]:
                n, s = len(self.seconds[route]), latency_summary(self.seconds[route])
                print(f"  {route:9s} {n:6d} requests  {n / seconds:6.1f}/s  p50 {s['p50_ms']:7.1f} ms  "
                      f"p95 {s['p95_ms']:7.1f} ms  statuses {dict(self.outcomes[route])}")
        return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=None, help="index folder (default: the sample index)")
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=60, help="how long the clients send")
    parser.add_argument("--flow", default="bm25", help="built-in flow searched and enqueued (default bm25)")
    parser.add_argument("--mix", default="0.5,0.1,0.4", help="weights of search, enqueue, progress")
    parser.add_argument("--max-tasks", type=int, default=4, help="max_tasks_per_key (tasks, so actors, at once)")
    args = parser.parse_args()

    key = secrets.token_urlsafe(32)
    mix = [float(w) for w in args.mix.split(",")]
    limits = {"limits": {"max_tasks_per_key": args.max_tasks}}
    with serve_app(sample_index(args.index), key=key, service=limits) as base:
        load = Load(base, key, args.flow, mix, 0.0)
        asyncio.run(warm_up(load))
        print(f"{args.clients} clients x {args.seconds:.0f} s, flow {args.flow}, mix search/enqueue/progress {mix}; "
              f"load average before: {os.getloadavg()[0]:.1f}")
        load = Load(base, key, args.flow, mix, time.monotonic() + args.seconds)
        started = time.perf_counter()
        asyncio.run(run(load, args.clients))
        errors = load.report(time.perf_counter() - started)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    raise SystemExit(1 if errors else 0)


async def warm_up(load: Load) -> None:
    """One search first, untimed: the replica loads the flow's operators."""
    import httpx

    async with httpx.AsyncClient(base_url=load.base, headers=load.headers, timeout=600) as http:
        (await http.post("/v1/search", json={"flow": load.flow, "query": load.queries[0]})).raise_for_status()


async def run(load: Load, clients: int) -> None:
    await asyncio.gather(*(load.client(seed) for seed in range(clients)))


if __name__ == "__main__":
    main()
