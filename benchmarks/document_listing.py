"""What a request that reads an index's doc store costs, as the service makes them: a page of documents
(``GET /v1/indices/{name}/documents``), and the ids an upload or a delete checks, each on an index opened for
that request.

Side by side, rounds alternating, each in a fresh ``Index``:
(a) every shard loaded first (doc store, BM25 statistics, FAISS index), which is what ``Index.columns`` did
    before it read the doc stores alone;
(b) ``Index.columns`` as it is: the doc-store columns alone, memory-mapped.
Prints the seconds of each (median of the rounds) and the process's RSS growth over (a)'s first load.
The pages of both sides must be equal.

    .venv/bin/python benchmarks/document_listing.py --index PATH [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from _common import checked_args, rss_bytes, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True, help="an index built by tessera ingest")
    parser.add_argument("--rounds", type=int, default=3)
    args = checked_args(parser)

    from operators.store import Index
    from operators.store.listing import document_page

    def page(load_all: bool) -> tuple[float, dict, int]:
        gc.collect()
        before = rss_bytes()
        started = time.perf_counter()
        index = Index.open(args.index, verify=False)
        if load_all:
            index._current()  # the shards as a search loads them
        listed = document_page(index, 0, 100)
        seconds = time.perf_counter() - started
        grown = rss_bytes() - before
        del index
        return seconds, listed, grown

    page(False)  # the doc-store files into the OS cache, for both sides alike
    times: dict[str, list[float]] = {"loaded": [], "doc store": []}
    grown: dict[str, int] = {}
    pages = {}
    for _ in range(args.rounds):
        for label, load_all in (("loaded", True), ("doc store", False)):
            seconds, pages[label], rss = page(load_all)
            times[label].append(seconds)
            grown.setdefault(label, rss)
    assert pages["loaded"] == pages["doc store"], "the two sides listed different documents"
    print(f"{args.index}: {pages['doc store']['total']:,} documents, a page of 100 on a freshly opened index, "
          f"{args.rounds} rounds")
    for label, values in times.items():
        print(f"  {label:10s} median {statistics.median(values):.3f} s (all: {', '.join(f'{v:.2f}' for v in values)}),"
              f" RSS +{max(grown[label], 0) / 2**20:.0f} MiB on its first round")
    print(f"  loaded / doc store: {statistics.median(times['loaded']) / statistics.median(times['doc store']):.1f}x")


if __name__ == "__main__":
    run(main)
