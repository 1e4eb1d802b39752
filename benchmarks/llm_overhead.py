"""What Tessera's LLM layers cost over llama.cpp itself, measured side by side in one run.

1. Tokens/s of the embedded SmolLM2 on the same prompts (greedy, the same ``max_tokens``):
   llama-cpp-python called directly (``create_chat_completion`` on the loaded model), the
   gateway (``operators.llm.complete``: litellm Router + the custom provider), and an
   ``LLMStep`` (``self.ask``: params, usage records). Interleaved prompt by prompt, so a
   noisy neighbour hits all three alike. Goal: gateway and step >= 0.9x direct.
2. The Serve LLM deployment (``/v1/chat/completions`` through HTTP) against the in-process
   call, one request at a time: p50/p95 (goal: Serve p95 <= 1.5x), on a replica with as
   many llama.cpp threads as the in-process model.
3. Throughput of 8 concurrent clients on Serve against the in-process calls one after
   another (goal: higher), on two layouts: 1 replica ('whole') and one
   single-thread replica per core ('per-core'). ``--threads`` (default 1) is the llama.cpp threads of the
   in-process model and of the single replica.

    .venv/bin/python benchmarks/llm_overhead.py [--prompts 12] [--max-tokens 32] [--clients 8]
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from _common import print_side_by_side

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

QUESTIONS = ["Which insects make honey?", "What is a gothic cathedral?", "Why is the sky blue?",
             "Name three planets of the solar system.", "What does a compiler do?", "Who wrote Hamlet?",
             "How do plants make food?", "What is the capital of France?", "Explain rain in one sentence.",
             "What is a prime number?", "Why do we sleep?", "What is an index in a database?"]


def main() -> None:
    import functools
    import builtins

    builtins.print = functools.partial(print, flush=True)  # progress shows when the output is a file
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=12, help="prompts per side (cycled from a fixed list)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens generated per call")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients in the throughput part")
    parser.add_argument("--requests", type=int, default=12, help="timed single requests per side (part 2)")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads in-process and per Serve replica "
                        "(on shared, busy cores more threads than idle cores slow llama.cpp down sharply)")
    args = parser.parse_args()
    os.environ["TESSERA_LLM_THREADS"] = str(args.threads)
    prompts = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.prompts)]
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores; SmolLM2-135M Q4_1; {args.threads} llama.cpp thread(s) per model; max_tokens "
          f"{args.max_tokens}, temperature 0")
    tokens_per_second(prompts, args.max_tokens)
    serve_side_by_side(prompts, args, cores)


def tokens_per_second(prompts: list[str], max_tokens: int) -> None:
    """Part 1: direct llama.cpp vs the gateway vs an LLMStep, interleaved per prompt."""
    from operators.llm import LLMStep, complete
    from operators.llm.embedded_model import load

    class Probe(LLMStep):
        name = "bench.llm_probe"

    llama, lock = load("smollm2-135m-instruct")
    step = Probe({"model": "local", "max_tokens": max_tokens, "timeout": 600})
    messages = lambda p: [{"role": "user", "content": p}]  # noqa: E731
    complete(prompts[0], model="local", max_tokens=4)  # warm: the Router and the loaded model
    sides = {"llama-cpp-python direct": [0, 0.0], "gateway complete()": [0, 0.0], "LLMStep.ask": [0, 0.0]}
    texts: dict[str, list[str]] = {name: [] for name in sides}
    for prompt in prompts:
        started = time.perf_counter()
        with lock:
            llama.reset()
            out = llama.create_chat_completion(messages=messages(prompt), max_tokens=max_tokens, temperature=0)
        add(sides, texts, "llama-cpp-python direct", out["usage"]["completion_tokens"],
            time.perf_counter() - started, out["choices"][0]["message"]["content"])
        started = time.perf_counter()
        done = complete(prompt, model="local", max_tokens=max_tokens, timeout=600)
        add(sides, texts, "gateway complete()", done.completion_tokens, time.perf_counter() - started, done.text)
        started = time.perf_counter()
        (done,) = step.ask({"q": messages(prompt)}).values()
        add(sides, texts, "LLMStep.ask", done.completion_tokens, time.perf_counter() - started, done.text)
    direct = sides["llama-cpp-python direct"][0] / sides["llama-cpp-python direct"][1]
    print(f"\n1. tokens/s over {len(prompts)} prompts (interleaved)")
    for name, (tokens, seconds) in sides.items():
        rate = tokens / seconds
        same = sum(a == b for a, b in zip(texts[name], texts["llama-cpp-python direct"]))
        print(f"   {name:<26}{rate:>8.1f} tok/s  {rate / direct:>5.2f}x direct  ({tokens} tokens, "
              f"{seconds:.1f} s; same text as direct in {same}/{len(prompts)})")


def add(sides: dict, texts: dict, name: str, tokens: int, seconds: float, text: str) -> None:
    sides[name][0] += tokens
    sides[name][1] += seconds
    texts[name].append(text)


def serve_side_by_side(prompts: list[str], args: argparse.Namespace, cores: int) -> None:
    """Parts 2 and 3: the Serve deployment against the in-process call."""
    import ray
    import requests
    from ray import serve

    from operators.llm import complete
    from serve.app import build_app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ray.init(num_cpus=cores, include_dashboard=False, logging_level=logging.ERROR)
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
    one = {"min_replicas": 1, "max_replicas": 1}
    llms = [{"name": "whole", "threads": args.threads, "num_cpus": 0.5, "autoscaling": one,
             "max_ongoing_requests": 64},
            {"name": "per-core", "threads": 1, "num_cpus": 0.5, "max_ongoing_requests": 2,
             "autoscaling": {"min_replicas": cores, "max_replicas": cores}}]
    started = time.perf_counter()
    serve.run(build_app({"llms": llms, "service": None}), name="tessera", route_prefix="/",
              logging_config={"log_level": "WARNING"})
    print(f"\nserve app ready in {time.perf_counter() - started:.0f} s: 'whole' = 1 replica x {args.threads} threads, "
          f"'per-core' = {cores} replicas x 1 thread")
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    session = requests.Session()

    def served(model: str, prompt: str, http: requests.Session = session) -> int:
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": args.max_tokens,
                "temperature": 0}
        response = http.post(url, json=body, timeout=600)
        response.raise_for_status()
        return response.json()["usage"]["completion_tokens"]

    def local(prompt: str) -> int:
        return complete(prompt, model="local", max_tokens=args.max_tokens, timeout=600).completion_tokens

    for prompt in prompts[:2]:
        served("whole", prompt), served("per-core", prompt), local(prompt)
    local_s, served_s = [], []
    for i in range(args.requests):
        prompt = prompts[i % len(prompts)]
        t = time.perf_counter()
        local(prompt)
        local_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        served("whole", prompt)
        served_s.append(time.perf_counter() - t)
    print(f"\n2. one request at a time, {args.requests} requests per side (interleaved)")
    print_side_by_side("in-process complete()", local_s, "Serve /v1/chat/completions", served_s)

    work = [prompts[i % len(prompts)] for i in range(args.clients * 2)]
    t = time.perf_counter()
    tokens = sum(local(p) for p in work)
    rates = {"in-process, sequential": (tokens / (time.perf_counter() - t), time.perf_counter() - t)}
    for model in ("whole", "per-core"):
        t = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            sessions = [requests.Session() for _ in range(args.clients)]
            tokens = sum(pool.map(lambda ip: served(model, ip[1], sessions[ip[0] % args.clients]),
                                  enumerate(work)))
        seconds = time.perf_counter() - t
        rates[f"Serve '{model}', {args.clients} clients"] = (tokens / seconds, seconds)
    base = rates["in-process, sequential"][0]
    print(f"\n3. throughput over {len(work)} requests")
    for name, (rate, seconds) in rates.items():
        print(f"   {name:<32}{rate:>8.1f} tok/s  {rate / base:>5.2f}x  ({seconds:.1f} s)")
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
