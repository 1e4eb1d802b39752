"""A long soak of the real service: do memory, processes and Ray's logs settle under a steady mixed load?

Starts ``tessera serve`` (``serve/config.yaml``, 127.0.0.1, a free port, a key in ``$TESSERA_API_KEYS``, a private
``$TESSERA_HOME`` with a copy of the sample index, a private ``$TMPDIR`` for Ray's session), then N clients for M
minutes mix (benchmarks/_soak_load.py) the task API (run, enqueue and poll, cancel, delete), ``/v1/search`` (bm25,
dense, hybrid), OpenAI/Cohere embed and rerank, chats on the embedded model and the ``rag`` flow (streamed or not,
and streamed ones whose client closes the socket after the first bytes), uploads into a new and a kept index,
document fetch, list and delete, ``GET /tasks``, ``GET /flows``, ``/healthz`` and refusals (bad requests: a 4xx;
broken JSON: 422; unknown routes and ids: 404; a body over ``max_body_bytes``: 413); ``--only`` sends some kinds
alone. It serves a copy of HEAD (``--tree head``), so edits in the tree do not reach it. Every ``--sample-s``
(benchmarks/_soak_probe.py): RSS/USS, threads and open fds (sockets, pipes, SQLite files, deleted files, other) of
each process of the service's own tree by kind (GCS, raylet, agents, Serve controller and proxy, each deployment's
replicas, task workers), its Ray session folder (logs, spilled objects), Ray's object store, the task store's size,
the entries in its ``$TMPDIR`` (Ray's folder aside) and ``$TESSERA_HOME/uploads``. At the end: per kind, after
``--warmup-min``, first and last and the slopes in MB per minute and per 1,000 requests; threads and fds per kind,
first and last; statuses and p50/p95 per route, 5xx, timeouts and error lines in the logs; then the service is
stopped and nothing of it may be left. Raw JSON: --out.

    nice -n 10 .venv/bin/python benchmarks/serve_soak.py --minutes 35 [--clients 4] [--only KINDS] [--out DIR]
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
from _soak_load import MIX, Soak
from _soak_probe import fd_table, growth_table, sample

def report(soak: Soak, samples: list[dict], minutes: float, warmup_min: float) -> None:
    print("\n" + "\n".join(growth_table(samples, warmup_min)))
    print("\n" + "\n".join(fd_table(samples, warmup_min)))
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
    """Distinct ERROR / Traceback lines of the given logs, and what each traceback raised (``raised: ...``, its first
    line at the margin once Ray's ``(Actor pid=N)`` prefix is cut), ids and numbers masked, the most frequent first."""
    seen: collections.Counter = collections.Counter()
    mask = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]{8,}|\d+")
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        in_traceback = False
        for line in text.splitlines():
            bare = re.sub(r"^(\x1b\[\d+m)?\([^)]*pid=\d+[^)]*\)(\x1b\[0m)? ?", "", line)
            if in_traceback and bare[:1].isalpha() and not bare.startswith(("Traceback", "During handling")):
                seen["raised: " + mask.sub("N", bare.strip())[:200]] += 1
                in_traceback = False
            if re.search(r"\bERROR\b|Traceback|Exception|\bCRITICAL\b|exception was never retrieved", line):
                seen[mask.sub("N", line.strip())[:220]] += 1
            in_traceback = in_traceback or bare.startswith("Traceback (most recent call last)")
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
    parser.add_argument("--only", default="", metavar="KINDS",
                        help="comma-separated kinds of requests to send, to find which one a growth follows (the "
                             "warm-up still sends each kind once); default: all of " + ",".join(MIX))
    parser.add_argument("--tree", choices=("head", "work"), default="head",
                        help="serve a copy of the commit checked out (head: edits under way in the tree cannot "
                             "reach a worker mid-soak) or the working tree itself")
    args = parser.parse_args()
    only = [kind for kind in filter(None, args.only.split(","))]
    if set(only) - set(MIX):
        parser.error(f"--only: no kind {', '.join(sorted(set(only) - set(MIX)))}; the kinds: {', '.join(MIX)}")
    mix = {kind: weight for kind, weight in MIX.items() if kind in only} if only else MIX

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
        warm = Soak(base, key, 0.0, args.max_tokens)
        asyncio.run(warm_up(warm))
        soak = Soak(base, key, time.monotonic() + args.minutes * 60, args.max_tokens)
        soak.uploaded, soak.serial = warm.uploaded, warm.serial  # the kept index's documents, fresh ids
        started = time.monotonic()
        stop = threading.Event()

        def sampler() -> None:
            while True:
                samples.append(last := sample(proc.pid, session, home, started, soak.requests(), seen))
                api, workers = last["kinds"].get("replica:api", {}), last["kinds"].get("task_worker", {})
                tree = {m: sum(row[m] for row in last["kinds"].values()) for m in ("fds", "sockets", "threads")}
                print(f"[{last['t_min']:5.1f} min] api {api.get('rss_mb', 0):.0f} MB, {api.get('fds')} fds; "
                      f"task workers {workers.get('n', 0)}; gcs {last['kinds'].get('gcs', {}).get('rss_mb', 0):.0f} "
                      f"MB; tree {tree['fds']} fds ({tree['sockets']} sockets), {tree['threads']} threads; logs "
                      f"{last['logs_mb']:.1f} MB; store {last['task_store_mb']:.1f} MB; object store "
                      f"{last['object_store_mb'] or 0:.1f} MB; tmp {last['tmp_entries']}, uploads "
                      f"{last['upload_entries']} entries; requests {soak.requests()}; problems {len(soak.problems)}",
                      flush=True)
                # kept should the run fail later
                (args.out / "live.json").write_text(json.dumps(samples), encoding="utf-8")
                if stop.wait(args.sample_s):
                    return

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        asyncio.run(run_clients(soak, args.clients, mix))
        stop.set()
        thread.join()
        samples.append(sample(proc.pid, session, home, started, soak.requests(), seen))  # the last
        minutes = (time.monotonic() - started) / 60
        report(soak, samples, minutes, args.warmup_min)
        errors = error_lines([log_path, *sorted(logs.glob("serve/*.log")), *sorted(logs.glob("*.err"))])
        print(f"\nerror-looking lines in serve output, logs/serve/*.log and logs/*.err: {len(errors)} distinct\n  "
              + "\n  ".join(errors))
        result = {"minutes": minutes, "clients": args.clients, "kinds": list(mix), "samples": samples,
                  "problems": soak.problems,
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
    """Each kind once, in order (all of them, also with ``--only``), untimed in the soak's figures; the kept index
    is made here."""
    rng = random.Random(-1)
    async with httpx.AsyncClient(base_url=soak.base, headers=soak.headers, timeout=600) as http:
        for action in MIX:
            await soak.step(http, rng, -1, action)
    print(f"warm-up: {dict((k, dict(v)) for k, v in soak.outcomes.items())}; problems {soak.problems}", flush=True)


async def run_clients(soak: Soak, clients: int, mix: dict[str, float]) -> None:
    await asyncio.gather(*(soak.client(n, mix) for n in range(clients)))


if __name__ == "__main__":
    main()
