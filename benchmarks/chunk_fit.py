"""How much of each chunk the encoder never reads: chunks of 256 regex tokens against the ``ingest`` spec's chunking.

MiniLM reads 256 word pieces, two of them its markers, of "title. chunk" and drops the rest. For the first N
documents of each corpus, each chunking's chunks are tokenized as the embed step joins them, and the chunks cut
and the non-space characters past the cut are counted (BEIR corpus.jsonl files).

    .venv/bin/python benchmarks/chunk_fit.py ../shared/data/scifact/corpus.jsonl data/sample/corpus.jsonl --limit 1000
"""

from __future__ import annotations

import argparse
import itertools
import json

import pyarrow as pa
import yaml

from _common import REPO_ROOT

ENCODER = "all-MiniLM-L6-v2"
READS = 254  # MiniLM's max_seq_length, less [CLS] and [SEP]


def documents(path: str, limit: int) -> pa.Table:
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in itertools.islice(f, limit)]
    return pa.table({"docno": [str(d["_id"]) for d in docs], "title": [d.get("title") or "" for d in docs],
                     "text": [d.get("text") or "" for d in docs]})


def unread(chunks: pa.Table, tokenizer) -> tuple[int, int, int]:
    """(chunks cut, non-space characters past the cut, non-space characters in all)."""
    cut = lost = total = 0
    for title, text in zip(chunks.column("title").to_pylist(), chunks.column("text").to_pylist()):
        read = f"{title}. {text}" if title else text
        encoding = tokenizer.encode(read, add_special_tokens=False)
        total += len(read) - read.count(" ")
        if len(encoding.ids) > READS:
            cut += 1
            rest = read[encoding.offsets[READS - 1][1]:]
            lost += len(rest) - rest.count(" ")
    return cut, lost, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+", help="BEIR corpus.jsonl files")
    parser.add_argument("--limit", type=int, default=1000, help="documents of each corpus (its first)")
    args = parser.parse_args()
    from operators.preprocess._model_windows import model_tokenizer
    from operators.registry import create

    spec = yaml.safe_load((REPO_ROOT / "flows" / "specs" / "ingest.yaml").read_text(encoding="utf-8"))
    chunkings = {"256 regex tokens": {"unit": "tokens", "size": 256, "overlap": 32},
                 "ingest spec": spec["steps"]["chunk"]["params"]}
    tokenizer = model_tokenizer(ENCODER)
    print("| corpus | chunking | chunks | cut by the encoder | text never embedded |\n|---|---|---|---|---|")
    for path in args.corpora:
        docs = documents(path, args.limit)
        for name, params in chunkings.items():
            chunks = create("preprocess.chunk", params)(docs)
            cut, lost, total = unread(chunks, tokenizer)
            print(f"| {path} | {name} | {chunks.num_rows:,} | {cut:,} | {lost / total:.1%} |")


if __name__ == "__main__":
    main()
