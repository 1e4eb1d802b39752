"""The static embedder against MiniLM, side by side: docs/s through embed.sentence_transformer on this CPU.

Both models embed the same texts (``title. text``) through the embedding operator, as ingestion
does, in chunks taken in turn (round robin), so load from elsewhere hits both alike. Each row gives
docs per wall second and per CPU second of this process (the second is steadier on a shared
machine), and the static model's speed-up over MiniLM. ``bare`` is model2vec's own
``StaticModel.encode`` on the same static model: the operator's overhead (goal: operator/bare >= 0.9).
Corpora: SciFact abstracts (long), WordNet glosses (short) and, with ``--scale``, the scale corpus
(benchmarks/build_scale_corpus.py). The static model's batch sizes are compared too
(``--static-batches``): the fastest sets ``operators.models.batching.STATIC_BATCH``. Ranking quality
is measured with ``tessera bench`` (hybrid_static, dense_static; docs/results.md).

    .venv/bin/python benchmarks/embed_static.py                          # needs tessera train --model static
    .venv/bin/python benchmarks/embed_static.py --limit 500 --scale ~/.tessera/datasets/scale-100000-seed0
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from _common import DATA, SCIFACT, WORDNET, embedded_texts, read_beir_corpus  # noqa: F401  (puts the repo on sys.path)


def timed(encode, chunks: list[list[str]], turn: int, clocks: dict[str, list[float]], name: str) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    encode(chunks[turn])
    clocks[name][0] += time.perf_counter() - wall
    clocks[name][1] += time.process_time() - cpu


def side_by_side(texts: list[str], encoders: dict, chunk: int) -> dict[str, tuple[float, float]]:
    """{name: (docs per wall s, docs per CPU s)}, the encoders taking turns chunk by chunk."""
    chunks = [texts[lo:lo + chunk] for lo in range(0, len(texts), chunk)]
    names = list(encoders)
    clocks = {name: [0.0, 0.0] for name in names}
    for turn in range(len(chunks)):
        shift = turn % len(names)
        for name in names[shift:] + names[:shift]:  # rotate who goes first
            timed(encoders[name], chunks, turn, clocks, name)
    return {name: (len(texts) / wall, len(texts) / cpu) for name, (wall, cpu) in clocks.items()}


def operator(model: str, batch: int | None = None):
    import pyarrow as pa

    from operators import create

    op = create("embed", {"model": model, "encode_batch_size": batch})
    op.ensure_setup()
    return lambda texts: op(pa.table({"text": texts}))


def bare(model: str):
    try:
        from model2vec import StaticModel
    except ImportError:
        return None
    from operators.models import resolve_model_path

    static = StaticModel.from_pretrained(str(resolve_model_path(model)))
    return lambda texts: static.encode(texts, batch_size=1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--static", default="tessera-static", help="the static model (default tessera-static)")
    parser.add_argument("--baseline", default="all-MiniLM-L6-v2", help="the transformer model (default MiniLM)")
    parser.add_argument("--limit", type=int, default=2000, help="documents per corpus (MiniLM's time sets it)")
    parser.add_argument("--scale", type=Path, help="also the scale corpus: a BEIR folder or corpus.jsonl")
    parser.add_argument("--chunk", type=int, default=250, help="texts per round-robin turn")
    parser.add_argument("--static-batches", default="64,256,1024,4096", help="static forward batches compared")
    args = parser.parse_args()

    corpora = {"scifact": SCIFACT, "wordnet": WORDNET}
    if args.scale:
        corpora["scale"] = args.scale / "corpus.jsonl" if args.scale.is_dir() else args.scale
    encoders = {"minilm": operator(args.baseline), "static": operator(args.static)}
    if (direct := bare(args.static)) is not None:
        encoders["bare"] = direct
    for name, encode in encoders.items():
        encode(["warm up the model and its tokenizer"])
    print(f"{'corpus':<9}{'docs':>6}{'words':>7}  " + "".join(f"{n + ' /s wall':>16}{n + ' /s cpu':>16}"
                                                             for n in encoders) + f"{'static/minilm':>15}"
          + f"{'static/bare':>13}", flush=True)
    for corpus, path in corpora.items():
        texts = embedded_texts(*read_beir_corpus(path, args.limit)[1:])
        rates = side_by_side(texts, encoders, args.chunk)
        words = np.mean([len(t.split()) for t in texts])
        cells = "".join(f"{wall:>16,.0f}{cpu:>16,.0f}" for wall, cpu in rates.values())
        bare_ratio = f"{rates['static'][0] / rates['bare'][0]:>13.2f}" if "bare" in rates else ""
        print(f"{corpus:<9}{len(texts):>6}{words:>7.0f}  {cells}{rates['static'][0] / rates['minilm'][0]:>14.1f}x"
              f"{bare_ratio}", flush=True)

    batches = [int(b) for b in args.static_batches.split(",") if b.strip()]
    texts = embedded_texts(*read_beir_corpus(corpora.get("scale", SCIFACT), 20 * max(batches))[1:])
    rates = side_by_side(texts, {b: operator(args.static, b) for b in batches}, max(batches))
    print("static forward batch (docs/s wall, cpu): " + ", ".join(f"{b}: {w:,.0f} / {c:,.0f}"
                                                                 for b, (w, c) in rates.items()))


if __name__ == "__main__":
    main()
