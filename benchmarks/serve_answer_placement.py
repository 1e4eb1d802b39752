"""Where a chat's answer is written: on the app's language-model deployment, or in the ingress replica.

The real app on 127.0.0.1 with the sample index and the ``smollm2`` deployment (llama.cpp, one thread a
replica, ``--replicas`` replicas), asked ``POST /v1/chat/completions`` with two saved flows that differ in
one thing, side by side in one run:

* ``placed``: ``rag`` as it is; the service places its answer step (``model: local``) on ``smollm2``;
* ``ingress``: ``rag`` with the answer model given as a copy of the same GGUF file in a temp folder (an
  alias in ``$TESSERA_MODELS``), which no deployment runs, so the ingress replica loads it and answers
  in-process, as every flow's answer step did before placement took language-model steps.

Both write the same answers (greedy, the same weights). Printed: p50/p95 of one chat at a time (requests
alternating between the flows) and the chats per second of ``--clients`` concurrent clients on each flow.

    .venv/bin/python benchmarks/serve_answer_placement.py [--requests 12] [--clients 4] [--replicas 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import print_side_by_side
from _serve import sample_index, serve_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

QUESTIONS = ["Which insects make honey?", "Who composed operas in the nineteenth century?",
             "What is a gothic cathedral?", "How does the immune system attack the body?",
             "What does an aphid feed on?", "What is modern architecture?"]


def main() -> None:
    import requests
    import yaml

    from flows.spec import FlowSpec
    from operators.llm.embedded_model import gguf_path

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=12, help="timed chats per flow, one at a time")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients in the throughput part")
    parser.add_argument("--replicas", type=int, default=2, help="smollm2 replicas (one llama.cpp thread each)")
    args = parser.parse_args()

    copy = Path(tempfile.mkdtemp(prefix="tessera-gguf-")) / "smollm2-copy.gguf"
    shutil.copyfile(gguf_path("smollm2-135m-instruct"), copy)
    models = copy.parent / "models.yaml"
    models.write_text(yaml.safe_dump({"local-copy": {"model": f"tessera/{copy}", "max_parallel_requests": 1,
                                                     "timeout": 300, "num_retries": 0}}), encoding="utf-8")
    os.environ["TESSERA_MODELS"] = str(models)
    os.environ["TESSERA_LLM_THREADS"] = "1"  # the ingress's llama.cpp on one thread, as each replica
    llm = {"name": "smollm2", "aliases": ["local"], "threads": 1, "num_cpus": 0.25,
           "max_ongoing_requests": 1, "autoscaling": {"min_replicas": args.replicas, "max_replicas": args.replicas}}
    rag = FlowSpec.load("rag").to_dict()
    ingress = FlowSpec.load("rag").to_dict()
    ingress["steps"]["answer"]["params"]["model"] = "local-copy"
    with serve_app(sample_index(), llms=[llm]) as base:
        session = requests.Session()
        for name, spec in (("placed", rag), ("ingress", ingress)):
            spec["name"] = name
            session.put(f"{base}/flows/{name}", json=spec, timeout=60).raise_for_status()

        def chat(flow: str, question: str, http: requests.Session = session) -> tuple[float, str]:
            started = time.perf_counter()
            response = http.post(f"{base}/v1/chat/completions", timeout=600, json={
                "model": flow, "messages": [{"role": "user", "content": question}]})
            response.raise_for_status()
            return time.perf_counter() - started, response.json()["choices"][0]["message"]["content"]

        for flow in ("placed", "ingress"):  # load the models on both paths before any measure
            chat(flow, QUESTIONS[0])
        seconds: dict[str, list[float]] = {"placed": [], "ingress": []}
        same = 0
        for i in range(args.requests):
            question = QUESTIONS[i % len(QUESTIONS)]
            order = ("placed", "ingress") if i % 2 == 0 else ("ingress", "placed")
            answers = {}
            for flow in order:
                took, answers[flow] = chat(flow, question)
                seconds[flow].append(took)
            same += answers["placed"] == answers["ingress"]
        print(f"one chat at a time, {args.requests} a flow, alternating; smollm2 replicas: {args.replicas}")
        print_side_by_side("ingress (in-process answer)", seconds["ingress"], "placed (smollm2 deployment)",
                           seconds["placed"])
        print(f"the same answer in {same}/{args.requests} chats")
        rates = {}
        for flow in ("ingress", "placed", "ingress", "placed"):  # twice each, alternating: the best of two
            work = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.clients * 3)]
            sessions = [requests.Session() for _ in range(args.clients)]
            started = time.perf_counter()
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(lambda iq: chat(flow, iq[1], sessions[iq[0] % args.clients]), enumerate(work)))
            rate = len(work) / (time.perf_counter() - started)
            rates[flow] = max(rates.get(flow, 0.0), rate)
        print(f"{args.clients} concurrent clients, {args.clients * 3} chats a round, best of two rounds:")
        for flow, rate in rates.items():
            print(f"  {flow:<8} {rate:6.2f} chats/s")
        print(f"  placed / ingress: {rates['placed'] / rates['ingress']:.2f}")


if __name__ == "__main__":
    main()
