"""Torch threads for query encoding: one against two, side by side on the same texts in one process.

A question the one-query latency audit raised: on a loaded 2-core machine one thread looked 2.5-7x faster
than two for a single query, which would argue for encoding small batches on one thread. This script times
MiniLM's ``encode`` for batches of 1 to 32 short queries (and 64 passages) with ``torch.set_num_threads(1)``
and ``(2)`` interleaved, and prints the median of each and their ratio. Run it on a quiet machine and on a
busy one: the answer depends on the load, which is why the default was left alone.

    python benchmarks/query_threads.py [--repeat 12]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=12, help="timed calls per side and batch size")
    args = parser.parse_args()

    import torch

    from operators.models import load_sentence_transformer

    model = load_sentence_transformer()
    queries = [f"what makes gothic cathedrals need flying buttresses {i}" for i in range(32)]
    passage = "Gothic architecture was prevalent in Europe from the late 12th century to the 16th century. " * 3

    def seconds(texts: list[str], threads: int) -> float:
        torch.set_num_threads(threads)
        started = time.perf_counter()
        model.encode(texts, batch_size=32)
        return time.perf_counter() - started

    print(f"{'texts':>14} {'1 thread ms':>12} {'2 threads ms':>13} {'2/1':>6}")
    batches = [(f"{n} queries", queries[:n]) for n in (1, 2, 4, 8, 16, 32)] + [("64 passages", [passage] * 64)]
    for label, texts in batches:
        seconds(texts, 1), seconds(texts, 2)  # warm-up of each setting
        one, two = [], []
        for _ in range(args.repeat):
            one.append(seconds(texts, 1))
            two.append(seconds(texts, 2))
        a, b = statistics.median(one), statistics.median(two)
        print(f"{label:>14} {a * 1000:12.1f} {b * 1000:13.1f} {b / a:6.2f}")


if __name__ == "__main__":
    main()
