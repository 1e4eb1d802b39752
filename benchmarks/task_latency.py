"""Seconds from a task's request to its result, with spare task workers (``spare_task_workers``, the default)
against without (every task starts its own Ray actor), side by side, with ``/v1/search`` (no task) for scale.

One Serve instance runs two apps over the same sample index: ``tessera`` keeps ``--spares`` spares, ``cold``
keeps none. Each round sends one ``/task/run`` (a ``bm25`` query, the smallest task) to each app in turn
(``cold`` first), and one ``/v1/search`` of the same query. ``--pause`` seconds pass between rounds: with a
pause the spares are ready when a task comes. ``--burst --pause 0``: each side's tasks back to back (cold's,
then the spares'), where a spare started by the previous task may still be importing. ``--upload``: the
same for one-document uploads (``POST /v1/indices/{name}/documents`` to a finished ingestion), both apps
serving MiniLM for the uploads' embed step. Prints each side's median and p95 and the ratio of the medians.

    .venv/bin/python benchmarks/task_latency.py [--rounds 10] [--pause 3] [--spares 1] [--burst] [--upload]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _serve import sample_index, serve_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")

MINILM = {"name": "all-MiniLM-L6-v2", "op": "embed.sentence_transformer", "params": {"model": "all-MiniLM-L6-v2"},
          "num_cpus": 0.5, "num_gpus": 0}


def seconds_to_result(url: str, body: dict) -> float:
    import requests

    started = time.perf_counter()
    response = requests.post(url, json=body, timeout=300)
    response.raise_for_status()
    assert response.json()["status"] == "finished", response.text
    return time.perf_counter() - started


def seconds_to_upload(base: str, name: str) -> float:
    import requests

    started = time.perf_counter()
    response = requests.post(f"{base}/v1/indices/{name}/documents", timeout=300, json={"documents": [
        {"id": "bees", "title": "Bees", "text": "Honey bees keep hives and dance to show where flowers are."}]})
    response.raise_for_status()
    task = response.json()["task_id"]
    while not (body := requests.get(f"{base}/task/progress/{task}", timeout=60).json())["has_finished"]:
        time.sleep(0.02)
    assert body["status"] == "finished", body
    return time.perf_counter() - started


def summary(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return f"median {statistics.median(ordered):.3f} s, p95 {ordered[max(0, int(0.95 * len(ordered)) - 1)]:.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10, help="requests per side (default 10)")
    parser.add_argument("--pause", type=float, default=3.0, help="seconds between rounds (default 3; 0: back to back)")
    parser.add_argument("--spares", type=int, default=1, help="spare_task_workers of the app with spares (default 1)")
    parser.add_argument("--burst", action="store_true", help="all of one side's rounds, then the other's, with "
                        "only a search between tasks (use with --pause 0: tasks back to back)")
    parser.add_argument("--upload", action="store_true", help="time one-document uploads instead of /task/run")
    args = parser.parse_args()

    import requests
    from ray import serve

    from serve.app import build_app

    index = sample_index()
    models = [MINILM] if args.upload else []  # an upload's embed step then runs on the app's deployment
    with serve_app(index, service={"spare_task_workers": args.spares}, models=models) as base:
        cold = {"api_deployment": "cold-api", "models": models,
                "service": {"default_index": str(index), "spare_task_workers": 0}}
        serve.run(build_app(cold), name="cold", route_prefix="/cold", logging_config={"log_level": "WARNING"})
        time.sleep(max(args.pause, 3.0))  # the spares' first start, which a running service has long done
        times: dict[str, list[float]] = {"spares": [], "cold": [], "search": []}
        # Alternating, cold first (a spare's refill after its task overlaps the pause, not a cold task); or with
        # --burst, one block of rounds per side.
        sides = [("cold", base + "/cold"), ("spares", base)]
        for block in ([side] for side in sides) if args.burst else [sides]:
            for r in range(args.rounds):
                for side, url in block:
                    body = {"flow": "bm25", "query": f"gothic cathedrals {r}"}
                    times[side].append(seconds_to_upload(url, f"r{r}-{side}") if args.upload
                                       else seconds_to_result(f"{url}/task/run", body))
                    print(f"round {r}: {side} {times[side][-1]:.3f} s")
                started = time.perf_counter()
                requests.post(f"{base}/v1/search", json={"flow": "bm25", "query": f"gothic cathedrals {r}",
                                                         "top_k": 10}, timeout=60).raise_for_status()
                times["search"].append(time.perf_counter() - started)
                time.sleep(args.pause)
    what = "one-document upload to a finished ingestion" if args.upload else "/task/run of one bm25 query"
    how = "each side's back to back" if args.burst else "alternating sides"
    print(f"\n{what}, {args.rounds} rounds, {how}, {args.pause:g} s apart:")
    print(f"  {args.spares} spare(s): {summary(times['spares'])}")
    print(f"  no spare:   {summary(times['cold'])}")
    print(f"  /v1/search, no task: {summary(times['search'])}")
    ratio = statistics.median(times["cold"]) / statistics.median(times["spares"])
    print(f"  ratio cold / spares (medians): {ratio:.1f}x")


if __name__ == "__main__":
    main()
