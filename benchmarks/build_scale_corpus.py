"""Build the card's 916,618-document corpus from the real text in ../shared/data (issue 33).

It exists to measure ingestion throughput and memory at the card's scale; quality is measured on
the real sets. Every corpus under ../shared/data (~145K documents) is cut into sentences. Each
output document draws a length from the word counts of the real passages (every set but the
WordNet glosses, which are definitions, not passages) and is filled to exactly that many words with
windows of consecutive sentences taken from documents picked at random, each in proportion to its
words, so all the real text is used about equally. Its title is the first window's document's title.

The same ``--seed`` gives the same file byte for byte (the sha256 is printed), and ``--count N`` is
the first N documents of the full corpus, so a small build is a slice of the big one. Documents are
written as they are made (memory holds the source sentences, not the output), to a temporary file
renamed into place. The output is a BEIR folder for ``tessera ingest --source``::

    .venv/bin/python benchmarks/build_scale_corpus.py                  # 916,618 documents
    .venv/bin/python benchmarks/build_scale_corpus.py --count 100000 --out /tmp/scale100k
"""

from __future__ import annotations

import argparse
import bisect
import functools
import hashlib
import itertools
import json
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import DATA  # noqa: E402

CARD_COUNT = 916_618
#: Sets whose documents are glosses, not passages: their text is used, their lengths are not.
NOT_PASSAGES = ("wordnet30_glosses",)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_MAX_WINDOW = 4  # sentences per window


@dataclass
class Source:
    """Every source document's text and title, and what is drawn from them."""

    texts: list[str]
    titles: list[str]
    cumulative_words: list[int]  # for picking a document in proportion to its words
    passage_lengths: np.ndarray  # words per real passage: the length distribution of the output
    all_lengths: np.ndarray  # words per source document, every set
    _sentences: dict[int, list[str]] = field(default_factory=dict)

    def sentences(self, doc: int) -> list[str]:
        """Document ``doc`` cut into sentences (on first use: a small build reads few documents)."""
        cut = self._sentences.get(doc)
        if cut is None:
            cut = self._sentences[doc] = _SENTENCE_END.split(" ".join(self.texts[doc].split()))
        return cut


def corpus_files(data: Path) -> list[Path]:
    files = sorted(data.glob("*/corpus.jsonl"))
    if not files:
        raise SystemExit(f"no */corpus.jsonl under {data}: pass --data, the folder of the BEIR sets")
    return files


@functools.lru_cache(maxsize=1)
def read_source(data: Path) -> Source:
    """The documents of every set under ``data``, read with Arrow's JSON reader (kept: a test builds twice)."""
    import pyarrow.compute as pc
    from pyarrow import json as pa_json

    texts: list[str] = []
    titles: list[str] = []
    passage_lengths, all_lengths = [], []
    for path in corpus_files(data):
        table = pa_json.read_json(path)
        text = pc.fill_null(table.column("text").cast("string"), "")
        title = pc.fill_null(table.column("title").cast("string"), "") if "title" in table.column_names else None
        words = pc.list_value_length(pc.utf8_split_whitespace(text)).to_numpy(zero_copy_only=False)
        keep = np.flatnonzero(words > 0)
        texts.extend(text.take(keep).to_pylist())
        titles.extend(title.take(keep).to_pylist() if title is not None else [""] * len(keep))
        all_lengths.append(words[keep])
        if path.parent.name not in NOT_PASSAGES:
            passage_lengths.append(words[keep])
    every = np.concatenate(all_lengths).astype(np.int64)
    return Source(texts, titles, np.cumsum(every).tolist(), np.concatenate(passage_lengths), every)


def documents(source: Source, seed: int):
    """(id, title, text) without end; the i-th is the same whatever the count."""
    rng = random.Random(seed)
    lengths = source.passage_lengths
    total = source.cumulative_words[-1]
    for i in itertools.count():
        target = int(lengths[int(rng.random() * len(lengths))])
        words: list[str] = []
        title = None
        while len(words) < target:
            doc = bisect.bisect_right(source.cumulative_words, int(rng.random() * total))
            sentences = source.sentences(doc)
            first = int(rng.random() * len(sentences))
            for sentence in sentences[first:first + 1 + int(rng.random() * _MAX_WINDOW)]:
                words.extend(sentence.split())
            title = source.titles[doc] if title is None else title
        yield f"scale-{i:07d}", title, " ".join(words[:target])


def build(out: Path, count: int, seed: int, data: Path, progress: bool = True) -> dict:
    """Write ``count`` documents to ``out/corpus.jsonl``; returns the lengths and the file's sha256."""
    from tqdm import tqdm

    source = read_source(data)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "corpus.jsonl"
    partial = out / f".corpus.jsonl.{os.getpid()}.tmp"
    digest = hashlib.sha256()
    lengths = np.empty(count, dtype=np.int32)
    try:
        with open(partial, "wb") as f, tqdm(total=count, unit="doc", disable=not progress, mininterval=1.0) as bar:
            for n, (docno, title, text) in enumerate(itertools.islice(documents(source, seed), count)):
                line = (json.dumps({"_id": docno, "title": title, "text": text}, ensure_ascii=False) + "\n").encode()
                f.write(line)
                digest.update(line)
                lengths[n] = text.count(" ") + 1
                if n % 10_000 == 9_999:
                    bar.update(10_000)
            bar.update(count - bar.n)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return {"path": str(target), "count": count, "seed": seed, "sha256": digest.hexdigest(),
            "source_documents": len(source.texts), "source_passage_lengths": source.passage_lengths,
            "source_all_lengths": source.all_lengths, "output_lengths": lengths}


PERCENTILES = (5, 25, 50, 75, 95, 99)


def length_table(report: dict) -> str:
    rows = [("source passages (length pool)", report["source_passage_lengths"]),
            ("source, every set", report["source_all_lengths"]), ("output", report["output_lengths"])]
    head = f"{'words per document':<32}{'docs':>9}{'mean':>7}" + "".join(f"{f'p{p}':>6}" for p in PERCENTILES)
    lines = [head]
    for label, values in rows:
        cells = "".join(f"{v:>6.0f}" for v in np.percentile(values, PERCENTILES))
        lines.append(f"{label:<32}{len(values):>9,}{values.mean():>7.1f}{cells}")
    return "\n".join(lines)


def default_out(count: int, seed: int) -> Path:
    from operators.home import tessera_home

    return tessera_home() / "datasets" / f"scale-{count}-seed{seed}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=CARD_COUNT, help=f"documents (default {CARD_COUNT:,})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path,
                        help="output BEIR folder (default $TESSERA_HOME/datasets/scale-COUNT-seedS)")
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the BEIR sets (default ../shared/data)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.count <= 0:
        parser.error(f"--count must be positive, not {args.count}")
    out = args.out or default_out(args.count, args.seed)
    started = time.perf_counter()
    report = build(out, args.count, args.seed, args.data, progress=not args.quiet)
    try:
        print(f"wrote {report['count']:,} documents from {report['source_documents']:,} source documents in "
              f"{time.perf_counter() - started:.1f} s -> {report['path']}\nsha256 {report['sha256']}")
        print(length_table(report))
        sys.stdout.flush()  # a closed pipe is found here, not at exit (where Python prints its own complaint)
    except BrokenPipeError:  # `... | head -1`: the corpus is written; the reader wanted less of the summary
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush writes nowhere
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
