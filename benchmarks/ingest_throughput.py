"""Ingestion throughput: ``flows.ingest`` on Ray Data vs bare ``SentenceTransformer.encode``.

Both embed the same texts (``title. text`` of WordNet glosses, unchunked, as the
ingest flow's embed step builds them) with the same MiniLM, on the same machine,
one after the other in this process. The ingestion figure is end to end: staging
the source, starting the embed actors and loading their models, embedding, building
each shard's BM25 statistics and FAISS index, commits. The bare figure is
``encode()`` alone on a model loaded beforehand. The goal is a ratio of 0.9 or more.

On a machine shared with other work, wall-clock figures mostly measure the share of
the CPUs each side got (Ray's several processes get a bigger share than one), so the
script also prints docs per CPU-second: CPU time of this process for the bare encode,
and of this process and every process under it (Ray's GCS, raylet and workers, read
from /proc) for the ingestion. That ratio does not depend on the other load.

::

    python benchmarks/ingest_throughput.py                 # first 20,000 glosses
    python benchmarks/ingest_throughput.py --limit 5000
    python benchmarks/ingest_throughput.py --limit 0       # the whole corpus (117,659)
    python benchmarks/ingest_throughput.py --limit 0 --skip-bare   # full-corpus ingestion time only

The bare encode's vectors are stored in the benchmarks' embedding cache
(``_common.store_corpus_vectors``), so a later ``ann_1m.py`` over the same glosses
does not encode them again.

Data is read in place from ../shared/data; the slice and the indices go to a
temporary folder (``--work-dir`` to keep them).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORDNET, embedded_texts, read_beir_corpus, store_corpus_vectors  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def write_slice(limit: int | None, folder: Path) -> tuple[Path, list[str]]:
    """The first ``limit`` glosses (all when None) as a JSONL file, and the texts the embed step will encode."""
    path = folder / f"wordnet_{limit or 'all'}.jsonl"
    kept = 0
    with open(WORDNET, encoding="utf-8") as src, open(path, "w", encoding="utf-8") as out:
        for line in src:
            if limit is not None and kept >= limit:
                break
            if line.strip():
                out.write(line if line.endswith("\n") else line + "\n")
                kept += 1
    texts = embedded_texts(*read_beir_corpus(path)[1:])
    return path, texts


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system, with reaped children) of process ``root`` and all its descendants."""
    root = root or os.getpid()
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(v) for v in fields[11:15]) / tick
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total


def bare_encode(texts: list[str], batch_size: int | None):
    """Wall and CPU seconds of ``encode()`` over ``texts`` (model loaded and warmed up first), and the vectors."""
    from operators.models import load_sentence_transformer
    from operators.models.batching import forward_batch_size

    model = load_sentence_transformer()
    batch_size = forward_batch_size(batch_size, model)
    model.encode(texts[:batch_size], batch_size=batch_size, normalize_embeddings=True)
    start, cpu = time.perf_counter(), time.process_time()
    vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False,
                           convert_to_numpy=True)
    return time.perf_counter() - start, time.process_time() - cpu, vectors


def run_ingest(source: Path, index: Path, shard_size: int, progress: bool):
    from flows.ingestion import ingest

    return ingest(source, index, shard_size=shard_size, executor="ray", chunk=None, progress=progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20_000,
                        help="glosses in the slice; 0 = the whole corpus (default 20000)")
    parser.add_argument("--skip-bare", action="store_true", help="time the ingestion only (no bare encode)")
    parser.add_argument("--shard-size", type=int, default=5000, help="documents per shard (default 5000)")
    parser.add_argument("--batch-size", type=int, default=None, help="texts per forward pass of the bare encode "
                        "(default: the embed step's default on this device, so both sides match)")
    parser.add_argument("--work-dir", help="keep the slice and the index here (default: a temporary folder)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if not WORDNET.exists():
        print(f"missing {WORDNET}: the shared evaluation data is not on this machine", file=sys.stderr)
        return 2

    import ray

    ray.init(include_dashboard=False, logging_level=logging.WARNING)  # every core of this machine
    cpus = int(ray.cluster_resources().get("CPU", 0))
    with tempfile.TemporaryDirectory(prefix="tessera-ingest-bench-") as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        source, texts = write_slice(args.limit or None, work)
        index = work / f"index_{len(texts)}_{int(time.time())}"
        n = len(texts)
        print(f"{n:,} WordNet glosses, {cpus} CPUs, load average {os.getloadavg()[0]:.1f} "
              "(the machine is shared: figures move with the other load)", flush=True)
        bare = bare_cpu = None
        if not args.skip_bare:
            bare, bare_cpu, vectors = bare_encode(texts, args.batch_size)
            print(f"bare encode:       {bare:7.1f} s  {n / bare:8,.0f} docs/s  {n / bare_cpu:6,.0f} docs/CPU-s",
                  flush=True)
            stored = store_corpus_vectors(WORDNET, vectors)
            if stored:
                print(f"(stored {stored} chunks of these vectors in the embedding cache for ann_1m.py)", flush=True)
            del vectors
        cpu = tree_cpu_seconds()
        report = run_ingest(source, index, args.shard_size, not args.quiet)
        ingest_cpu = tree_cpu_seconds() - cpu
        print(f"ingest (Ray Data): {report.seconds:7.1f} s  {report.docs_per_s:8,.0f} docs/s  "
              f"{n / ingest_cpu:6,.0f} docs/CPU-s  ({report.shards_written} shards, {report.chunks:,} chunks, "
              "BM25 + flat FAISS)")
        if bare is not None:
            print(f"ratio ingest / bare: {report.docs_per_s / (n / bare):.2f} wall, {bare_cpu / ingest_cpu:.2f} per "
                  f"CPU-second (goal >= 0.9); load average now {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
