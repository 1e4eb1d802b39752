"""A chat whose client left: does the language-model replica go on to the next request at once?

The real app on 127.0.0.1 with one ``smollm2`` replica (llama.cpp: one sequence at a time). Side by side in
one run, alternating, a short chat (``max_tokens`` 16) timed two ways:

* ``idle``: on an idle replica;
* ``behind a left chat``: just after a client started a long streamed answer (``max_tokens`` 400, a
  counting prompt) and left after its first 5 events, on a raw socket.

Printed: p50/p95 of the short chat both ways and their ratio (1.0: a left chat costs the next request
nothing), the tokens each left answer generated (the deployment's ``info()``), and the seconds of one whole
long answer, which is what the next request waited for when a left chat ran to its end.

    .venv/bin/python benchmarks/llm_abandoned.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from urllib.parse import urlparse

from _common import latency_summary
from _serve import sample_index, serve_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")

COUNT = "Count from 1 to 1000, one number after another, separated by commas."
SHORT = [{"role": "user", "content": "Which insects make honey?"}]


def main() -> None:
    import requests
    from ray import serve

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, help="short chats timed each way")
    args = parser.parse_args()
    llm = {"name": "smollm2", "aliases": ["local"], "threads": 1, "num_cpus": 0.25,
           "autoscaling": {"min_replicas": 1, "max_replicas": 1}}
    with serve_app(sample_index(), llms=[llm]) as base:
        url = urlparse(base)
        handle = serve.get_deployment_handle("smollm2", app_name="tessera")

        def tokens() -> int:
            return handle.info.remote().result().get("tokens", 0)  # 0 on a deployment that does not count them

        def short() -> tuple[float, int]:
            """Seconds of a short chat, and the tokens it wrote."""
            started = time.perf_counter()
            response = requests.post(f"{base}/v1/chat/completions", timeout=600, json={
                "model": "smollm2", "messages": SHORT, "max_tokens": 16, "temperature": 0})
            response.raise_for_status()
            return time.perf_counter() - started, response.json()["usage"]["completion_tokens"]

        def leave_a_long_chat() -> None:
            body = json.dumps({"model": "smollm2", "stream": True, "max_tokens": 400,
                               "messages": [{"role": "user", "content": COUNT}]}).encode()
            with socket.create_connection((url.hostname, url.port), timeout=600) as sock:
                sock.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: "
                              f"application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                              ).encode() + body)
                received = b""
                while received.count(b"data: ") < 5:
                    received += sock.recv(4096)

        short()  # the replica warm
        started = time.perf_counter()
        requests.post(f"{base}/v1/chat/completions", timeout=600, json={
            "model": "smollm2", "messages": [{"role": "user", "content": COUNT}], "max_tokens": 400,
            "temperature": 0}).raise_for_status()
        whole = time.perf_counter() - started
        seconds: dict[str, list[float]] = {"idle": [], "behind a left chat": []}
        generated = []
        for i in range(args.rounds):
            for way in (("idle", "behind a left chat") if i % 2 == 0 else ("behind a left chat", "idle")):
                time.sleep(1.0)  # the replica idle between measures
                if way == "idle":
                    seconds[way].append(short()[0])
                    continue
                before = tokens()
                leave_a_long_chat()
                took, written = short()
                seconds[way].append(took)
                generated.append(tokens() - before - written)  # the left answer's (about: EOS is sampled too)
        print(f"one smollm2 replica; {args.rounds} short chats (max_tokens 16) each way, alternating")
        print(f"{'':<24}{'p50 s':>8}{'p95 s':>8}")
        rows = {way: latency_summary(values) for way, values in seconds.items()}
        for way, row in rows.items():
            print(f"{way:<24}{row['p50_ms'] / 1000:>8.2f}{row['p95_ms'] / 1000:>8.2f}")
        ratio = rows["behind a left chat"]["p50_ms"] / rows["idle"]["p50_ms"]
        print(f"p50 ratio behind a left chat / idle: {ratio:.2f}")
        print(f"tokens each left answer generated: {generated} of 400")
        print(f"one whole 400-token answer: {whole:.1f} s (what the next request waited when a left chat ran on)")


if __name__ == "__main__":
    main()
