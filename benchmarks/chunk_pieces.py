"""The ingest spec's chunking (chunks counted in MiniLM's word pieces) against an earlier commit's, side by side.

Both commits' ``operators/preprocess/_model_windows.piece_windows`` cut the same documents (the first ``--docs`` of a
BEIR corpus.jsonl, in batches of ``--batch`` as a shard's are) in rounds that alternate, and must give the same
chunks. Prints each side's CPU seconds and wall seconds (the fastest round), documents per CPU second, and the ratio:

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="a BEIR corpus.jsonl")
    parser.add_argument("--before", required=True, help="the commit to compare with (a git revision)")
    parser.add_argument("--docs", type=int, default=30_000)
    parser.add_argument("--batch", type=int, default=5_000, help="documents a call (the ingest's shard size)")
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--overlap", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line).get("text") or "" for line in itertools.islice(f, args.docs)]
    old = subprocess.run(["git", "show", f"{args.before}:{MODULE}"], cwd=REPO_ROOT, check=True, capture_output=True,
                         text=True).stdout
    sides = {"before": load_module("windows_before", old), "now": load_module("windows_now",
                                                                                (REPO_ROOT / MODULE).read_text())}
    tokenizer = sides["now"].model_tokenizer(ENCODER)
    batches = [texts[i:i + args.batch] for i in range(0, len(texts), args.batch)]

    def cut(module) -> list:
        return [module.piece_windows(batch, tokenizer, args.size, args.overlap) for batch in batches]

    chunks = {name: cut(module) for name, module in sides.items()}  # a warm-up that also checks they agree
    if chunks["before"] != chunks["now"]:
        raise SystemExit("the two commits cut different chunks")
    n_chunks = sum(len(out[2]) for out in chunks["now"])
    best = {name: (float("inf"), float("inf")) for name in sides}
    for _ in range(args.rounds):
        for name, module in sides.items():
            cpu, wall = time.process_time(), time.perf_counter()
            cut(module)
            took = (time.process_time() - cpu, time.perf_counter() - wall)
            best[name] = min(best[name], took)
    print(f"{len(texts):,} documents -> {n_chunks:,} chunks, batches of {args.batch:,}, best of {args.rounds}")
    for name, (cpu, wall) in best.items():
        print(f"{name:>7}: {cpu:6.2f} CPU-s, {wall:6.2f} s wall, {len(texts) / cpu:,.0f} documents per CPU second")
    print(f"CPU before / now: {best['before'][0] / best['now'][0]:.2f}x; "
          f"wall: {best['before'][1] / best['now'][1]:.2f}x")


if __name__ == "__main__":
    main()
