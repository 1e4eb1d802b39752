"""Time from an upload to a searchable index: ``POST /v1/indices/{name}/documents`` until its task has finished,
with the task's encoder on the app's MiniLM deployment against a task that loads MiniLM itself, side by side.

One Serve instance runs two apps over the same ``$TESSERA_HOME``: ``tessera`` serves ``all-MiniLM-L6-v2`` (so an
upload's embed step is placed on it) and ``bare`` serves no model (its upload tasks load MiniLM in their own
actor, as before). Rounds alternate between them, each upload making a new index of ``--docs`` documents from
the sample corpus, so a noisy neighbour hits both alike. Prints each side's median and the ratio.

    .venv/bin/python benchmarks/upload_latency.py [--rounds 4] [--docs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="uploads per side (default 4)")
    parser.add_argument("--docs", type=int, default=1, help="documents per upload (default 1)")
    args = parser.parse_args()

    from ray import serve

    from serve.app import build_app

    corpus = [json.loads(line) for line in open(SAMPLE / "corpus.jsonl", encoding="utf-8")]
    index = sample_index()
    with serve_app(index, models=[MINILM]) as base:
        bare = {"api_deployment": "bare-api", "models": [], "service": {"default_index": str(index)}}
        serve.run(build_app(bare), name="bare", route_prefix="/bare", logging_config={"log_level": "WARNING"})
        times: dict[str, list[float]] = {"served encoder": [], "own encoder": []}
        for r in range(args.rounds):
            docs = [{"id": d["_id"], "title": d.get("title", ""), "text": d["text"]}
                    for d in corpus[r * args.docs:(r + 1) * args.docs]]
            for side, url in (("served encoder", base), ("own encoder", base + "/bare")):
                accepted, seconds, body = upload(url, f"r{r}-{side.split()[0]}", docs)
                assert body["status"] == "finished", body
                times[side].append(seconds)
                print(f"round {r}: {side:14s} {seconds:6.2f} s (202 after {accepted:.2f} s)")
    served, own = (statistics.median(times[s]) for s in ("served encoder", "own encoder"))
    print(f"\n{args.docs} document(s) per upload, {args.rounds} rounds, median seconds to a finished task:")
    print(f"  served encoder (the app's MiniLM deployment): {served:.2f} s")
    print(f"  own encoder (the task loads MiniLM):          {own:.2f} s")
    print(f"  ratio own / served: {own / served:.1f}x")


if __name__ == "__main__":
    main()
