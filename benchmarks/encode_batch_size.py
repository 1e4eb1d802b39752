"""Texts per forward pass on this machine: docs/s of each batch size, side by side.

Encodes SciFact abstracts (``title. text``; ``--limit`` of them) with all-MiniLM-L6-v2,
and scores (title, abstract) pairs with a cross-encoder (one document's title standing
in for a query), at each batch size in ``--sizes``. The texts go in chunks taken in
turn by each size (the first to go rotates), so load from elsewhere on a shared machine
hits every size alike; each size's rate is its texts over its summed seconds, and the
speedup is against ``--baseline``. The largest
difference between a size's vectors and the baseline's is printed too (padding differs
with the batch, so the last bits may). This is what sets ``operators.models.batching``'s
defaults: a batch pads every text to its longest, and on CPU a small batch also stays
in cache; a GPU needs large batches to be busy.

    python benchmarks/encode_batch_size.py                    # 1,536 abstracts, sizes 8,16,32,64
    python benchmarks/encode_batch_size.py --cross-encoder ~/.tessera/models/tessera-cross-encoder
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _common import SCIFACT, embedded_texts, read_beir_corpus  # noqa: F401  (also puts the repo on sys.path)


def interleaved(sizes: list[int], items: list, chunk: int, run) -> tuple[dict[int, float], dict[int, list]]:
    """Seconds and outputs of ``run(size, part)`` for every size over ``items``, one chunk per turn."""
    seconds = dict.fromkeys(sizes, 0.0)
    outputs: dict[int, list] = {size: [] for size in sizes}
    for turn, lo in enumerate(range(0, len(items), chunk)):
        part = items[lo:lo + chunk]
        for size in sizes[turn % len(sizes):] + sizes[:turn % len(sizes)]:
            start = time.perf_counter()
            outputs[size].append(run(size, part))
            seconds[size] += time.perf_counter() - start
        print(f"  {lo + len(part)}/{len(items)}", end="\r", flush=True)
    print()
    return seconds, outputs


def report(title: str, unit: str, count: int, seconds: dict[int, float], outputs: dict[int, list],
           baseline: int) -> None:
    base = np.concatenate(outputs[baseline])
    print(f"{title}: {count} {unit}")
    print(f"{'batch':>6} {unit + '/s':>10} {'speedup':>8} {'max |Δ|':>9}")
    for size, spent in seconds.items():
        delta = float(np.max(np.abs(np.concatenate(outputs[size]) - base)))
        print(f"{size:>6} {count / spent:>10.1f} {seconds[baseline] / spent:>7.2f}x {delta:>9.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(SCIFACT), help="BEIR corpus.jsonl")
    parser.add_argument("--limit", type=int, default=1536, help="documents to encode")
    parser.add_argument("--sizes", default="8,16,32,64", help="comma-separated batch sizes")
    parser.add_argument("--baseline", type=int, default=64, help="the size the speedups are against")
    parser.add_argument("--chunk", type=int, default=128, help="texts per turn")
    parser.add_argument("--cross-encoder", default=None, help="CrossEncoder folder (default: MiniLM with a "
                        "seeded untrained head: the speed is the same)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import tempfile

    from operators.models import load_cross_encoder, load_sentence_transformer

    sizes = sorted({int(s) for s in args.sizes.split(",")} | {args.baseline})
    docs = embedded_texts(*read_beir_corpus(args.corpus, args.limit)[1:])
    print(f"{len(docs)} documents from {args.corpus}; batch sizes {sizes} (baseline {args.baseline}), "
          f"device {args.device}", flush=True)

    embedder = load_sentence_transformer(device=args.device)
    embedder.encode(docs[:8])  # warm up

    def embed(size, part):
        return embedder.encode(part, batch_size=size, normalize_embeddings=True, convert_to_numpy=True,
                               show_progress_bar=False)

    report("embedding (all-MiniLM-L6-v2)", "docs", len(docs), *interleaved(sizes, docs, args.chunk, embed),
           args.baseline)

    folder = args.cross_encoder
    if folder is None:
        from operators.testing import untrained_cross_encoder

        folder = str(untrained_cross_encoder(tempfile.mkdtemp(prefix="tessera-ce-")))
    model = load_cross_encoder(folder, device=args.device)
    pairs = [(docs[i].split(". ", 1)[0], doc) for i, doc in enumerate(reversed(docs))]  # a title vs an abstract

    def score(size, part):
        return np.asarray(model.predict(part, batch_size=size, show_progress_bar=False, convert_to_numpy=True))

    report("cross-encoder (title, abstract) pairs", "pairs", len(pairs),
           *interleaved(sizes, pairs, args.chunk, score), args.baseline)


if __name__ == "__main__":
    main()
