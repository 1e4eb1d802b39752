"""Time from an upload to a searchable index: ``POST /v1/indices/{name}/documents`` until its task has finished,
with the task's encoder on the app's MiniLM deployment against a task that loads MiniLM itself, side by side.

One Serve instance runs two apps over the same ``$TESSERA_HOME``: ``tessera`` serves ``all-MiniLM-L6-v2`` (so an
upload's embed step is placed on it) and ``bare`` serves no model (its upload tasks load MiniLM in their own
actor, as before). Rounds alternate between them, each upload making a new index of the sample corpus's first
``--docs`` documents, so a noisy neighbour hits both alike. Prints each side's median and the ratio.

With ``--search``, searches run on the served app for 10 s before each round and throughout its upload: how
much an upload's embedding on the shared deployment slows the searches that embed their queries there.

    .venv/bin/python benchmarks/upload_latency.py [--rounds 4] [--docs 1] [--search]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import threading
import time

from _serve import SAMPLE, sample_index, serve_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MINILM = {"name": "all-MiniLM-L6-v2", "op": "embed.sentence_transformer", "params": {"model": "all-MiniLM-L6-v2"},
          "num_cpus": 0.5, "num_gpus": 0}


def upload(base: str, name: str, documents: list[dict]) -> tuple[float, float, dict]:
    """Seconds to the POST's answer and to the task's end, and its final progress."""
    import requests

    started = time.perf_counter()
    response = requests.post(f"{base}/v1/indices/{name}/documents", json={"documents": documents}, timeout=120)
    response.raise_for_status()
    task, accepted = response.json()["task_id"], time.perf_counter() - started
    while True:
        body = requests.get(f"{base}/task/progress/{task}", timeout=60).json()
        if body["has_finished"]:
            return accepted, time.perf_counter() - started, body
        time.sleep(0.1)


class Searches:
    """``hybrid`` searches sent one after another on a thread while the block runs; their latencies in ``seconds``
    (on the served app its query encoder is the same deployment an upload embeds on)."""

    def __init__(self, base: str):
        self.base, self.seconds, self.stop = base, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import requests

        body = {"flow": "hybrid", "query": "gothic cathedrals in france", "top_k": 5}
        while not self.stop.is_set():
            started = time.perf_counter()
            requests.post(f"{self.base}/v1/search", json=body, timeout=120).raise_for_status()
            self.seconds.append(time.perf_counter() - started)

    def __enter__(self) -> "Searches":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def percentiles(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return (f"p50 {1000 * statistics.median(ordered):.0f} ms, p95 {1000 * ordered[int(0.95 * len(ordered)) - 1]:.0f} "
            f"ms over {len(ordered)} searches")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="uploads per side (default 4)")
    parser.add_argument("--docs", type=int, default=1, help="documents per upload (default 1)")
    parser.add_argument("--search", action="store_true", help="also time searches on the served app while its "
                        "uploads run, against the same searches for 10 s with nothing else running")
    args = parser.parse_args()
    corpus = [json.loads(line) for line in open(SAMPLE / "corpus.jsonl", encoding="utf-8")]
    if not 1 <= args.docs <= len(corpus):
        parser.error(f"--docs must be 1 to {len(corpus)} (the sample corpus's documents)")

    from ray import serve

    from serve.app import build_app

    index = sample_index()
    with serve_app(index, models=[MINILM]) as base:
        bare = {"api_deployment": "bare-api", "models": [], "service": {"default_index": str(index)}}
        serve.run(build_app(bare), name="bare", route_prefix="/bare", logging_config={"log_level": "WARNING"})
        times: dict[str, list[float]] = {"served encoder": [], "own encoder": []}
        searched: dict[str, list[float]] = {"idle": [], "during": []}
        docs = [{"id": d["_id"], "title": d.get("title", ""), "text": d["text"]} for d in corpus[:args.docs]]
        for r in range(args.rounds):  # each upload makes a new index, so the same documents serve every round
            if args.search:
                with Searches(base) as idle:
                    time.sleep(10)
                searched["idle"] += idle.seconds
            for side, url in (("served encoder", base), ("own encoder", base + "/bare")):
                with (Searches(base) if args.search and url == base else contextlib.nullcontext()) as during:
                    accepted, seconds, body = upload(url, f"r{r}-{side.split()[0]}", docs)
                if during is not None:
                    searched["during"] += during.seconds
                assert body["status"] == "finished", body
                times[side].append(seconds)
                print(f"round {r}: {side:14s} {seconds:6.2f} s (202 after {accepted:.2f} s)")
    served, own = (statistics.median(times[s]) for s in ("served encoder", "own encoder"))
    print(f"\n{args.docs} document(s) per upload, {args.rounds} rounds, median seconds to a finished task:")
    print(f"  served encoder (the app's MiniLM deployment): {served:.2f} s")
    print(f"  own encoder (the task loads MiniLM):          {own:.2f} s")
    print(f"  ratio own / served: {own / served:.1f}x")
    if args.search:
        print(f"searches on the served app, nothing else running:  {percentiles(searched['idle'])}")
        print(f"searches on the served app during its uploads:     {percentiles(searched['during'])}")


if __name__ == "__main__":
    main()
