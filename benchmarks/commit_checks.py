"""What a commit's live-id checks cost on a large index: one small shard committed into an index of ``--docs``
documents in shards of ``--shard-size`` (916,618 in 184 shards, the scale corpus' shape, by default).

Every commit reads the docnos of every live shard (a docno already live is refused). An ingest's commit also
collects the doc ids of every shard but its source's own (so a document that ``Index.add`` put in meanwhile is
refused), ``Index.add``'s those of every shard; an ingest reads the same doc ids once before it embeds
(``Index.live_doc_ids``). The index is BM25-only with a few words a document (what is
measured reads ids, not text), built in a temporary folder; each kind of commit is timed ``--rounds`` times (a new
one-document shard each time: a shard commits once), the kinds interleaved, the fastest kept:

    .venv/bin/python benchmarks/commit_checks.py
    .venv/bin/python benchmarks/commit_checks.py --docs 100000 --shard-size 5000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import _common  # noqa: F401  (puts the repository on sys.path)


def build(path: Path, docs: int, shard_size: int):
    import pyarrow as pa

    from operators.store import Index, IndexSettings

    index = Index.create(path, IndexSettings(dense=False))
    infos = []
    for start in range(0, docs, shard_size):
        ids = [f"doc{i}" for i in range(start, min(start + shard_size, docs))]
        table = pa.table({"docno": [f"{d}#0" for d in ids], "doc_id": ids,
                          "text": [f"word{i % 997} term{i % 89}" for i in range(start, start + len(ids))]})
        infos.append(index.write_shard(f"big-{start // shard_size:05d}", table))
    index.commit(infos)
    return index


def fastest(fn, rounds: int) -> float:
    best = float("inf")
    for n in range(rounds):
        start = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=916_618)
    parser.add_argument("--shard-size", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import pyarrow as pa

    from operators.store import Index

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        index = build(Path(tmp) / "idx", args.docs, args.shard_size)
        print(f"index: {args.docs:,} documents in {len(index.manifest.shards)} shards, built in "
              f"{time.perf_counter() - start:.1f} s")
        index = Index.open(index.path)  # a fresh reader, as an ingest opens it
        sides = {"docnos only": False,
                 "an ingest's (other sources' doc ids)": lambda shard_id: not shard_id.startswith("new-"),
                 "Index.add's (every shard's doc ids)": True}
        print(f"live_doc_ids (an ingest's check before it embeds): {fastest(lambda n: index.live_doc_ids(), 3):.3f} s")
        best = {label: float("inf") for label in sides}
        for n in range(args.rounds):  # the sides interleaved, round by round (a shared, noisy machine)
            for side, (label, refuse) in enumerate(sides.items()):
                info = index.write_shard(f"new-{side}-{n}", pa.table({"docno": [f"new{side}.{n}#0"],
                                                                       "doc_id": [f"new{side}.{n}"],
                                                                       "text": ["a new document"]}))
                start = time.perf_counter()
                index.commit([info], refuse_live_doc_ids=refuse)
                best[label] = min(best[label], time.perf_counter() - start)
        base = best["docnos only"]
        for label, seconds in best.items():
            print(f"commit of one document, checks {label}: {seconds:.3f} s ({seconds / base:.2f}x)")


if __name__ == "__main__":
    main()
