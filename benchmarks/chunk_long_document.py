"""Peak memory and time of the ingestion's chunker on one long document, against an earlier commit's, side by side.

A corpus may hold a few documents of megabytes (a book, a log) among short ones. The ``ingest`` spec's chunker
(200 MiniLM pieces, overlap 32, with the piece ids the embed step reads) tokenized each text whole, and the Rust
tokenizer holds some 150 bytes a character while it encodes: one 8 MB document took 1.2 GB. It now tokenizes
slices (``operators/preprocess/_model_windows.py``: ``SLICE_CHARS``, ``BATCH_CHARS``), and cuts a long text into
windows as its slices come, holding ``HELD_PIECES`` of its pieces, not all of them (a 50 MB one held 400 MB).

The document is ``--mb`` MB of a BEIR corpus's texts joined by newlines, beside 50 of its short ones. Each side
runs ``preprocess.chunk`` in a fresh process, with the ``operators`` package of ``--before`` (a git revision) or of
this checkout; it prints the process's peak RSS (read before the chunks are compared), its RSS before chunking,
seconds, and whether the chunks and their piece ids are the same:

    .venv/bin/python benchmarks/chunk_long_document.py --before c07db002 [--mb 8] [--corpus CORPUS.jsonl]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO_ROOT, SCIFACT, checked_args, run  # (puts the repository on sys.path)

PARAMS = {"unit": "tokens", "size": 200, "overlap": 32, "tokenizer": "all-MiniLM-L6-v2", "pieces_column": "pieces"}


def documents(corpus: Path, mb: float):
    import pyarrow as pa

    texts = [json.loads(line)["text"] for line in corpus.open(encoding="utf-8") if line.strip()]
    joined, size, i = [], 0, 0
    while size < mb * 1_000_000:
        joined.append(texts[i % len(texts)])
        size, i = size + len(joined[-1]) + 1, i + 1
    docs = ["\n".join(joined), *texts[:50]]
    return pa.table({"docno": [f"d{i}" for i in range(len(docs))], "text": docs})


def worker(root: str, corpus: Path, mb: float) -> None:
    """One side, in its own process, with the ``operators`` package under ``root``: the peak RSS is this process's."""
    sys.path.insert(0, root)
    from operators.registry import create

    table = documents(corpus, mb)
    chunker = create("preprocess.chunk", PARAMS)
    chunker.ensure_setup()
    pages = int(Path("/proc/self/statm").read_text(encoding="utf-8").split()[1])
    held = pages * os.sysconf("SC_PAGE_SIZE") // 1024  # RSS now, KB
    started = time.perf_counter()
    out = chunker(table)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # before the chunks are read into Python to compare
    digest = hashlib.sha256(json.dumps([out.column("text").to_pylist(), out.column("pieces").to_pylist()])
                            .encode()).hexdigest()
    print(json.dumps({"seconds": seconds, "peak_mb": peak / 1024,
                      "held_mb": held / 1024, "chunks": out.num_rows, "digest": digest}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit to compare the chunker with (a git revision)")
    parser.add_argument("--mb", type=float, default=8.0, help="the long document's size in MB")
    parser.add_argument("--corpus", type=Path, default=SCIFACT, help="a BEIR corpus.jsonl whose texts make it")
    args = checked_args(parser)
    with tempfile.TemporaryDirectory() as before:
        archive = subprocess.run(["git", "archive", args.before, "operators"], cwd=REPO_ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", before], input=archive, check=True)
        sides = {}
        for name, path in (("before", before), ("now", REPO_ROOT)):
            done = subprocess.run([sys.executable, __file__, "--worker", str(path), str(args.corpus), str(args.mb)],
                                  check=True, capture_output=True, text=True)
            sides[name] = json.loads(done.stdout.splitlines()[-1])
    print(f"one document of {args.mb:g} MB and 50 short ones, preprocess.chunk {PARAMS}")
    for name, side in sides.items():
        print(f"{name:>7}: {side['seconds']:6.2f} s, peak RSS {side['peak_mb']:7.0f} MB "
              f"({side['peak_mb'] - side['held_mb']:6.0f} MB over the {side['held_mb']:.0f} MB held before chunking), "
              f"{side['chunks']:,} chunks")
    before, now = sides["before"], sides["now"]
    print(f"before/now: {before['seconds'] / now['seconds']:.2f}x the time, "
          f"{(before['peak_mb'] - before['held_mb']) / (now['peak_mb'] - now['held_mb']):.2f}x the memory over what "
          f"was held, {before['peak_mb'] / now['peak_mb']:.2f}x the peak RSS")
    same = before["digest"] == now["digest"]
    print("the same chunks and piece ids" if same else "THE CHUNKS DIFFER")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], Path(sys.argv[3]), float(sys.argv[4]))
    else:
        run(main)
