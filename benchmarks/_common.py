"""Helpers shared by the benchmark scripts (not a benchmark itself).

Paths to the shared evaluation data (read in place, never copied into the
repository), a cache directory outside the repository, a BEIR corpus reader,
cached MiniLM embeddings of a corpus, and latency summaries.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/x.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

DATA = REPO_ROOT.parent / "shared" / "data"
WORDNET = DATA / "wordnet30_glosses" / "corpus.jsonl"
SCIFACT = DATA / "scifact" / "corpus.jsonl"
CACHE = Path(os.environ.get("TESSERA_BENCH_CACHE", Path.home() / ".cache" / "tessera-bench"))


def read_beir_corpus(path: Path, limit: int | None = None) -> tuple[list[str], list[str], list[str]]:
    """(ids, titles, texts) of a BEIR-style JSONL corpus, in file order."""
    ids, titles, texts = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(ids) >= limit:
                break
            if not line.strip():
                continue
            doc = json.loads(line)
            ids.append(str(doc.get("_id", doc.get("docno", doc.get("id")))))
            titles.append(doc.get("title") or "")
            texts.append(doc.get("text") or "")
    return ids, titles, texts


def embedded_texts(titles: list[str], texts: list[str]) -> list[str]:
    """What the embed step encodes for each document: ``title. text`` (the text alone without a title)."""
    return [f"{t}. {x}" if t else x for t, x in zip(titles, texts)]


def encode_corpus(path: Path, limit: int | None = None, batch_size: int = 128, chunk: int = 8192,
                  verbose: bool = True) -> np.ndarray:
    """L2-normalised all-MiniLM-L6-v2 vectors (float32, n x 384) of ``title. text`` for
    the first ``limit`` documents of ``path`` (all when None). Encoded ``chunk`` documents
    at a time, each chunk cached as .npy under CACHE, so an interrupted run resumes and a
    smaller ``limit`` reuses what a bigger run has encoded."""
    sentences = embedded_texts(*read_beir_corpus(path, limit)[1:])
    whole_corpus: list[str] | None = None  # read once, on the first chunk that is not cached
    parts = []
    for lo in range(0, len(sentences), chunk):
        cached = _vector_chunk_path(path, chunk, lo)
        if cached.is_file() and len(np.load(cached, mmap_mode="r")) >= min(chunk, len(sentences) - lo):
            parts.append(np.load(cached)[: len(sentences) - lo])
            continue
        from operators.models import load_sentence_transformer

        if whole_corpus is None:
            whole_corpus = embedded_texts(*read_beir_corpus(path)[1:])
        full = whole_corpus[lo: lo + chunk]  # the whole chunk, so a bigger run can reuse it
        start = time.perf_counter()
        vectors = load_sentence_transformer().encode(full, batch_size=batch_size, normalize_embeddings=True,
                                                     convert_to_numpy=True, show_progress_bar=False)
        if verbose:
            print(f"encoded documents {lo}-{lo + len(full)} in {time.perf_counter() - start:.0f} s -> {cached}",
                  flush=True)
        _save_atomically(cached, vectors)
        parts.append(vectors[: len(sentences) - lo].astype(np.float32))
    return np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)


def store_corpus_vectors(path: Path, vectors: np.ndarray, chunk: int = 8192) -> int:
    """Put MiniLM vectors of the first ``len(vectors)`` documents of ``path``, encoded elsewhere
    (``ingest_throughput.py``'s bare encode), into ``encode_corpus``'s cache, so a later
    ``encode_corpus`` (``ann_1m.py``) reuses them. Only whole chunks, or the corpus's last one,
    are stored; returns how many chunks were written."""
    total = len(read_beir_corpus(path)[0])
    written = 0
    for lo in range(0, len(vectors), chunk):
        part = vectors[lo: lo + chunk]
        if len(part) < min(chunk, total - lo):
            break  # a partial chunk would make a bigger run re-encode it anyway
        cached = _vector_chunk_path(path, chunk, lo)
        if not cached.is_file():
            _save_atomically(cached, part)
            written += 1
    return written


def _vector_chunk_path(path: Path, chunk: int, lo: int) -> Path:
    """Cache file of the ``chunk`` vectors from document ``lo`` on; keyed by the corpus file's identity."""
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return CACHE / f"minilm_{path.parent.name}_{key}_{chunk}_{lo // chunk:04d}.npy"


def _save_atomically(target: Path, vectors: np.ndarray) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".tmp.npy")
    np.save(partial, np.asarray(vectors, dtype=np.float32))
    partial.rename(target)


def latency_summary(seconds: list[float] | np.ndarray) -> dict[str, float]:
    """p50 / p95 / p99 / mean of per-call latencies, in milliseconds."""
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
            "p99_ms": float(np.percentile(ms, 99)), "mean_ms": float(ms.mean())}


def print_side_by_side(local_label: str, local_s: list[float], served_label: str, served_s: list[float]) -> float:
    """p50/p95/mean of an in-process side and a served side, and their p95 ratio (goal: served <= 1.5x); returns it."""
    a, b = latency_summary(local_s), latency_summary(served_s)
    print(f"{'':<28}{'p50 ms':>10}{'p95 ms':>10}{'mean ms':>10}")
    for label, row in ((local_label, a), (served_label, b)):
        print(f"{label:<28}{row['p50_ms']:>10.1f}{row['p95_ms']:>10.1f}{row['mean_ms']:>10.1f}")
    ratio = b["p95_ms"] / a["p95_ms"]
    print(f"p95 ratio Serve / in-process: {ratio:.2f} (goal <= 1.5: {'met' if ratio <= 1.5 else 'NOT met'}); "
          f"p50 ratio {b['p50_ms'] / a['p50_ms']:.2f}")
    return ratio


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; no psutil needed)."""
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


#: Real questions for searching an index built from the scale corpus (whose text comes from these sets).
QUERY_SETS = ("hotpotqa_dev_subset", "musique_dev_subset", "scifact")


def real_queries(n: int, seed: int = 0) -> list[str]:
    """``n`` real queries drawn from the query files of ``QUERY_SETS``."""
    import json

    texts = []
    for name in QUERY_SETS:
        with open(DATA / name / "queries.jsonl", encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f if line.strip()]
    picked = np.random.default_rng(seed).permutation(len(texts))[:n]
    return [texts[i] for i in picked]


def index_vectors(path: Path) -> np.ndarray:
    """Every live chunk's vector of a Tessera index, shard by shard (its exact vectors)."""
    from operators.store import Index, dense

    manifest = Index.open(path).manifest
    parts = []
    for info in manifest.shards:  # only the FAISS files: the doc stores and BM25 statistics stay on disk
        folder = path / "shards" / info.id
        vectors = dense.vectors(dense.load(folder), folder)
        parts.append(np.delete(vectors, manifest.tombstones.get(info.id, []), axis=0))
    return np.concatenate(parts).astype(np.float32, copy=False)


def encode_queries(path: Path, queries: list[str]) -> np.ndarray:
    """``queries`` embedded with the index's own encoder (L2-normalised)."""
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder
    from operators.store import Index

    encoder = Index.open(path).settings.encoder
    return SentenceTransformerEmbedder({"model": encoder}, step_id="queries").encode(queries)


#: Whole-number options that may be 0 (a seed, a port, no warm-up); every other one counts something and is >= 1.
ZERO_OK = frozenset({"seed", "port", "warmup", "search_dates", "ood_limit", "spares"})


def checked_args(parser, zero_ok: frozenset[str] = ZERO_OK):
    """``parser.parse_args()``, with every whole-number option checked: a size of 0 or less (``--queries -5``, which
    a slice read as "all but 5", or ``--repeat 0``, a median of nothing) is refused as argparse refuses a word."""
    args = parser.parse_args()
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if action.type is int and isinstance(value, int):
            least = 0 if action.dest in zero_ok else 1
            if value < least:
                parser.error(f"{action.option_strings[0]} must be {'0 or more' if least == 0 else 'at least 1'}, "
                             f"got {value}")
    return args


def run(main) -> None:
    """Run a script's ``main``; a ``TesseraError`` (an index that is not there, a bad parameter) is one line and exit
    status 2, as the ``tessera`` commands end, not a traceback."""
    from operators.errors import TesseraError

    try:
        main()
    except TesseraError as err:
        print(f"{Path(sys.argv[0]).name}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
