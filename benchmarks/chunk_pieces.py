"""The ingestion's tokenizing, side by side: the chunker against an earlier commit's, and the encoder's inputs made
from the chunks' texts against those composed from the chunker's piece ids.

On the first ``--docs`` documents of a BEIR corpus.jsonl, in batches of ``--batch`` (a shard), in rounds that
alternate, the fastest round kept; CPU seconds (what bounded the H200's ingestion) and wall seconds:

* chunking as the ``ingest`` spec does (200 MiniLM pieces, overlap 32): ``piece_windows`` of ``--before`` (a git
  revision), of this checkout, and of this checkout keeping each chunk's piece ids (``pieces_column``); the chunks
  must be the same;
* the embed step's input tensors for ``title + ". " + chunk``, batches of ``--encode-batch`` longest first as the
  encoder makes them: tokenized from the texts, and composed from the pieces (``operators.models.piece_inputs``,
  the titles tokenized); the tensors must be the same. The forward passes are left out: on a GPU they are not what
  bounds the embed actors.

    .venv/bin/python benchmarks/chunk_pieces.py --corpus ~/.tessera/datasets/scale-916618-seed0/corpus.jsonl \\
        --before 4bdae48 [--docs 30000] [--rounds 3]

``RAYON_NUM_THREADS=1`` before the command times the tokenizer on one thread (the Rust tokenizer uses every core).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import subprocess
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from _common import REPO_ROOT

MODULE = "operators/preprocess/_model_windows.py"
ENCODER = "all-MiniLM-L6-v2"


def load_module(name: str, source: str):
    """``source`` (a module's text) as a module of its own, its imports from this checkout."""
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def best_of(rounds: int, sides: dict) -> dict[str, tuple[float, float]]:
    """The fastest (CPU seconds, wall seconds) of each side's function, the sides alternating each round."""
    best = {name: (float("inf"), float("inf")) for name in sides}
    for _ in range(rounds):
        for name, run in sides.items():
            cpu, wall = time.process_time(), time.perf_counter()
            run()
            best[name] = min(best[name], (time.process_time() - cpu, time.perf_counter() - wall))
    return best


def show(best: dict[str, tuple[float, float]], docs: int, reference: str) -> None:
    for name, (cpu, wall) in best.items():
        print(f"  {name:>22}: {cpu:6.2f} CPU-s, {wall:6.2f} s wall, {docs / cpu:,.0f} documents per CPU second, "
              f"CPU {best[reference][0] / cpu:.2f}x {reference}'s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="a BEIR corpus.jsonl")
    parser.add_argument("--before", required=True, help="the commit to compare the chunker with (a git revision)")
    parser.add_argument("--docs", type=int, default=30_000)
    parser.add_argument("--batch", type=int, default=5_000, help="documents a call (the ingest's shard size)")
    parser.add_argument("--encode-batch", type=int, default=128, help="texts per forward pass (a GPU's default)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        docs = [json.loads(line) for line in itertools.islice(f, args.docs)]
    texts = [d.get("text") or "" for d in docs]
    old = subprocess.run(["git", "show", f"{args.before}:{MODULE}"], cwd=REPO_ROOT, check=True, capture_output=True,
                         text=True).stdout
    current = (REPO_ROOT / MODULE).read_text(encoding="utf-8")
    before, now = load_module("windows_before", old), load_module("windows_now", current)
    tokenizer, prefix = now.model_tokenizer(ENCODER), now.continuation_prefix(ENCODER)
    batches = [range(i, min(i + args.batch, len(texts))) for i in range(0, len(texts), args.batch)]

    def cut(module, continuation=None) -> list:
        return [module.piece_windows([texts[i] for i in b], tokenizer, 200, 32, *([continuation] if continuation
                                                                                  else [])) for b in batches]

    chunked = cut(now, prefix)
    if [c[:3] for c in cut(before)] != [c[:3] for c in chunked]:
        raise SystemExit("the two commits cut different chunks")
    n_chunks = sum(len(c[2]) for c in chunked)
    print(f"{len(texts):,} documents -> {n_chunks:,} chunks, batches of {args.batch:,}, best of {args.rounds}")
    print("chunking:")
    show(best_of(args.rounds, {"before": lambda: cut(before), "now": lambda: cut(now),
                               "now, keeping piece ids": lambda: cut(now, prefix)}), len(texts), "before")

    from operators.embed.sentence_transformer import SentenceTransformerEmbedder
    from operators.models.fast_tokens import longest_first

    embed = SentenceTransformerEmbedder({"title_column": "title"})
    embed.ensure_setup()
    fast = embed._fast
    shards = []
    for b, (text_of, _, chunks, pieces) in zip(batches, chunked):
        rows = pa.table({"title": [docs[b[t]].get("title") or "" for t in text_of], "text": chunks,
                         "_pieces": pa.array(pieces, pa.list_(pa.int32()))})
        shards.append((rows, embed.texts(rows)))
    kept = sum(p is not None for _, _, _, ps in chunked for p in ps)
    print(f"the embed step's inputs ({kept:,} of {n_chunks:,} chunks with piece ids; batches of {args.encode_batch}):")

    def inputs(composed: bool) -> list:
        out = []
        for rows, joined in shards:
            bodies = embed.piece_bodies(rows, "_pieces") if composed else None
            order = longest_first(joined)
            for start in range(0, len(order), args.encode_batch):
                part = order[start:start + args.encode_batch]
                out.append(fast._features([joined[i] for i in part], None if bodies is None else
                                          [bodies[i] for i in part])["input_ids"])
        return out

    if any(not (a == b).all() for a, b in zip(inputs(False), inputs(True))):
        raise SystemExit("composed inputs differ from the tokenizer's")
    show(best_of(args.rounds, {"tokenized from text": lambda: inputs(False),
                               "composed from pieces": lambda: inputs(True)}), len(texts), "tokenized from text")


if __name__ == "__main__":
    main()
