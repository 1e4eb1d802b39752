"""What ``tessera ingest --retry-failed`` costs to read a big file's failed lines again: one pass over the file for
all of them (``flows.ingestion.records.read_line_records``) against one pass from the file's start for each line,
as a retry read them before (each line alone, which is also the reference the documents are checked against).

A JSONL file and a CSV file of about ``--mb`` MB each are made of SciFact's documents repeated under new ids; the
``--failed`` lines the retry reads are spread evenly over each file. The figures are wall seconds of each way, side
by side, and the ratio; the documents (and what still fails) must be the same.

::

    python benchmarks/retry_lines.py                   # 50 MB, 100 failed lines
    python benchmarks/retry_lines.py --mb 10 --failed 20

The files go to a temporary folder (``--work-dir`` to keep them).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import SCIFACT, checked_args, read_beir_corpus, run  # noqa: E402


def write_sources(folder: Path, corpus: Path, mb: float) -> tuple[Path, Path, int]:
    """A JSONL and a CSV file of about ``mb`` MB of the corpus's documents repeated, and their number of documents."""
    ids, titles, texts = read_beir_corpus(corpus)
    size = sum(len(json.dumps({"_id": i, "title": t, "text": x})) + 1 for i, t, x in zip(ids, titles, texts))
    copies = max(1, round(mb * 1e6 / size))
    jsonl, csv = folder / "big.jsonl", folder / "big.csv"
    with open(jsonl, "w", encoding="utf-8") as f:
        for copy in range(copies):
            f.writelines(json.dumps({"_id": f"{i}-{copy}", "title": t, "text": x}) + "\n"
                         for i, t, x in zip(ids, titles, texts))
    n = copies * len(ids)
    pcsv.write_csv(pa.table({"_id": [f"{i}-{c}" for c in range(copies) for i in ids],
                             "title": titles * copies, "text": texts * copies}), csv)
    return jsonl, csv, n


def shown(got: dict) -> dict:
    return {line: g.to_pylist() if isinstance(g, pa.Table) else g for line, g in sorted(got.items())}


def compare(op, path: Path, lines: list[int]) -> dict:
    from flows.ingestion.records import read_line_records

    started = time.perf_counter()
    alone = {line: read_line_records(op, str(path), [line])[line] for line in lines}
    per_line = time.perf_counter() - started
    started = time.perf_counter()
    together = read_line_records(op, str(path), lines)
    one_pass = time.perf_counter() - started
    assert shown(together) == shown(alone), f"{path}: the documents differ"
    return {"file": path.name, "mb": round(path.stat().st_size / 1e6, 1), "lines": len(lines),
            "documents": sum(isinstance(g, pa.Table) for g in together.values()),
            "per_line_s": round(per_line, 2), "one_pass_s": round(one_pass, 2), "ratio": round(per_line / one_pass, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50.0, help="size of each file (MB)")
    parser.add_argument("--failed", type=int, default=100, help="failed lines read again in each file")
    parser.add_argument("--corpus", type=Path, default=SCIFACT, help="a BEIR corpus.jsonl (default: SciFact's)")
    parser.add_argument("--work-dir", type=Path, default=None)
    args = checked_args(parser)
    if args.mb <= 0:
        parser.error(f"--mb must be more than 0, got {args.mb}")
    from operators.registry import create

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.work_dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        jsonl, csv, n = write_sources(folder, args.corpus, args.mb)
        step = max(1, n // args.failed)
        wanted = list(range(step // 2 + 1, n + 1, step))[:args.failed]  # 1-based; the CSV's header is line 1
        rows = [compare(create("sources.jsonl", {"path": str(jsonl)}), jsonl, wanted),
                compare(create("sources.csv", {"path": str(csv)}), csv, [line + 1 for line in wanted])]
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    run(main)
