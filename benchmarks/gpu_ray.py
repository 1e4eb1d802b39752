"""The Ray half of the GPU check (issues 31 and 33): Ray Data GPU actors, the 916K ingestion, Serve's ``num_gpus``.

``gpu_check.py`` measures the models in one process; this script measures what Ray adds on the same GPU,
each part in turn so one that fails leaves the others' figures (they go to ``gpu_ray.json``):

* ``embed``: the flow ``sources.jsonl -> embed.sentence_transformer`` (``--actors`` actors with
  ``--gpus-per-actor`` of the GPU each, float16) on the Ray executor over N scale-corpus passages, against
  bare ``SentenceTransformer.encode`` of the first ``--bare-passages`` of them in this process; passages/s
  and Ray/bare. Each Ray run starts its actors and loads the model: the fixed cost is what the run takes beyond
  N at the bare rate.
* ``ingest``: ``ingest_scale.py`` over the 916,618-document scale corpus with the ``ingest`` flow's steps,
  the encoder on the GPU: in one process (``--executor local``: the next shard embedded in a thread while
  the one before is written) or on Ray (``num_gpus`` per embed actor, ``--actors`` of them sharing it);
  wall time, time per stage, peak RSS, and the check that no document is lost or duplicated.
* ``serve``: the embedder deployment with ``ray_actor_options: {num_gpus: 1}``: the replica must get the GPU
  (Ray sets its ``CUDA_VISIBLE_DEVICES``) and its model must sit on it; one request's latency.

The weights are seeded random (``gpu_check.random_minilm``): throughput does not depend on them.

    python3 benchmarks/gpu_ray.py --carried .gpu --corpus /tmp/scale/corpus.jsonl --out $OUT
    # a CPU rehearsal (small): --device cpu --embed-passages 2000 --ingest-count 2000 --gpus-per-actor 0
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

from _common import REPO_ROOT
from gpu_check import random_minilm, timed

PARTS = ("embed", "serve", "ingest")  # the longest last: a part cut short by the time limit loses least


def passages(corpus: Path, count: int) -> tuple[Path, list[str]]:
    """The first ``count`` documents of ``corpus`` as their own JSONL file, and their texts as the embed step
    builds them (title, then text)."""
    path = corpus.with_name(f"first-{count}.jsonl")
    with open(corpus, encoding="utf-8") as f:
        lines = list(islice(f, count))
    path.write_text("".join(lines), encoding="utf-8")
    docs = [json.loads(line) for line in lines]
    return path, [f"{d['title']}. {d['text']}" if d.get("title") else d["text"] for d in docs]


def embed_on_ray(model: Path, corpus: Path, count: int, device: str, dtype: str, size: int, gpus: float,
                 actors: int, bare_count: int) -> dict:
    """Passages/s of bare encode in this process (over the first ``bare_count`` passages: at its ~4,000/s the
    whole set took the part's time on 2026-12-04) and of the embedding flow on Ray Data over ``count`` (two runs),
    its embed step on ``actors`` actors with ``gpus`` of a GPU each: several processes tokenize for one GPU."""
    from sentence_transformers import SentenceTransformer

    from flows.api import Flow
    from flows.executors.ray_env import ensure_ray
    from operators.models.precision import with_precision

    path, texts = passages(corpus, count)

    def bare_seconds() -> float:  # the model is freed on return, before the Ray actor loads its own
        bare = with_precision(SentenceTransformer(str(model), device=device), dtype)
        bare.encode(texts[:size], batch_size=size)
        return timed(lambda: bare.encode(texts[:bare_count], batch_size=size))

    bare_count = min(bare_count, count)
    bare_rate = bare_count / bare_seconds()
    spec = {"name": "embed_gpu", "steps": {
        "read": {"op": "sources.jsonl", "params": {"path": str(path)}},
        "embed": {"op": "embed.sentence_transformer", "batch_size": 8192, "num_gpus": gpus, "concurrency": actors,
                  "params": {"model": str(model), "device": device, "dtype": dtype, "title_column": "title",
                             "encode_batch_size": size}}}}
    started = time.perf_counter()
    ensure_ray()
    ray_start_s = time.perf_counter() - started
    flow = Flow.load(spec)
    runs = []
    for _ in range(2):
        started = time.perf_counter()
        rows = flow.run(None, executor="ray", keep_history=False).table.num_rows
        runs.append(time.perf_counter() - started)
        assert rows >= count, f"the Ray flow gave {rows} rows for {count} passages"
    best = min(runs)
    report = {"passages": count, "bare_passages": bare_count, "encode_batch_size": size, "actors": actors,
              "gpus_per_actor": gpus, "bare_per_s": bare_rate, "ray_start_s": ray_start_s, "ray_runs_s": runs,
              "ray_per_s": count / best, "ray_over_bare": count / best / bare_rate,
              "ray_fixed_cost_s": best - count / bare_rate}
    print(f"  embed: bare {report['bare_per_s']:,.0f} passages/s; Ray flow ({actors} actor(s) at {gpus} GPU) "
          f"{report['ray_per_s']:,.0f} "
          f"(runs {', '.join(f'{s:.1f}' for s in runs)} s; ray.init {ray_start_s:.1f} s); Ray/bare "
          f"{report['ray_over_bare']:.2f}", flush=True)
    return report


def gpu_ingest_spec(model: Path, folder: Path, device: str, dtype: str, size: int, gpus: float, actors: int) -> Path:
    """The ``ingest`` flow with its encoder on the GPU: ``actors`` embed actors, ``gpus`` of a GPU each."""
    import yaml

    spec = yaml.safe_load((REPO_ROOT / "flows" / "specs" / "ingest.yaml").read_text(encoding="utf-8"))
    spec["name"] = "ingest_gpu"
    embed = spec["steps"]["embed"]
    embed["params"].update(model=str(model), device=device, dtype=dtype, encode_batch_size=size)
    embed.update(num_cpus=1, concurrency=actors, **({"num_gpus": gpus} if gpus else {}))
    spec["index_settings"]["encoder"] = str(model)
    if spec["steps"].get("chunk", {}).get("params", {}).get("tokenizer"):  # the packaged MiniLM is not there
        spec["steps"]["chunk"]["params"]["tokenizer"] = str(model)
    path = folder / "ingest_gpu.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def ingest(spec: Path, corpus: Path, count: int, work: Path, executor: str) -> dict:
    """``ingest_scale.py`` in a child process; its summary lines, as printed. Its stderr (Ray's warnings: spilling,
    a worker killed) goes straight to this script's, so a run cut by the time limit keeps it."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("ingest_scale.py")), "--count", str(count),
                           "--corpus", str(corpus), "--spec", str(spec), "--executor", executor, "--work", str(work)],
                          stdout=subprocess.PIPE, text=True)
    lines = done.stdout.strip().splitlines()
    print("\n".join(f"  ingest: {line}" for line in lines), flush=True)
    return {"exit": done.returncode, "seconds": time.perf_counter() - started, "lines": lines}


def serve_on_gpu(model: Path, device: str, dtype: str, gpus: float) -> dict:
    """The embedder deployment asking Ray for ``gpus``: where its replica and its model are, one request's time."""
    from ray import serve

    from serve.deployments.embedder import EmbedderDeployment

    app = EmbedderDeployment.options(ray_actor_options={"num_gpus": gpus, "num_cpus": 1}).bind(
        "minilm-gpu", "embed.sentence_transformer", {"model": str(model), "device": device, "dtype": dtype})
    started = time.perf_counter()
    handle = serve.run(app, name="gpu-check", route_prefix=None)
    deploy_s = time.perf_counter() - started
    texts = [f"passage {i} about rivers and the towns on them" for i in range(64)]
    handle.embed.remote(texts).result()
    seconds = []
    for _ in range(20):
        started = time.perf_counter()
        handle.embed.remote(texts).result()
        seconds.append(time.perf_counter() - started)
    info = handle.info.remote().result()
    serve.delete("gpu-check")
    report = {"num_gpus": gpus, "deploy_s": deploy_s, "gpu_ids": info["gpu_ids"], "device": info["device"],
              "request_64_texts_p50_ms": 1000 * sorted(seconds)[len(seconds) // 2]}
    print(f"  serve: {json.dumps(report)}", flush=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--carried", type=Path, required=True, help="what gpu_check.py --prepare wrote")
    parser.add_argument("--corpus", type=Path, required=True, help="the scale corpus (build_scale_corpus.py)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "gpu-ray",
                        help="the models and the index (large: not under --out)")
    parser.add_argument("--device", default=None, help="torch device (default: cuda when present)")
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"))
    parser.add_argument("--encode-batch-size", type=int, default=512)
    parser.add_argument("--embed-passages", type=int, default=300_000)
    parser.add_argument("--bare-passages", type=int, default=40_000, help="of them, encoded bare for its rate")
    parser.add_argument("--ingest-count", type=int, default=916_618)
    parser.add_argument("--gpus-per-actor", type=float, default=0.25, help="of a GPU, per embed actor (0: CPU)")
    parser.add_argument("--actors", type=int, default=4, help="embed actors of the Ray flow and the Ray ingestion")
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help="the ingestion's executor")
    args = parser.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work
    model = random_minilm(args.carried, work)
    report: dict = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "dtype": args.dtype}
    failed = []
    for part in args.parts:
        try:
            if part == "embed":
                report[part] = embed_on_ray(model, args.corpus, args.embed_passages, device, args.dtype,
                                            args.encode_batch_size, args.gpus_per_actor, args.actors,
                                            args.bare_passages)
            elif part == "serve":
                report[part] = serve_on_gpu(model, device, args.dtype, args.gpus_per_actor and 1)
            else:
                spec = gpu_ingest_spec(model, work, device, args.dtype, args.encode_batch_size, args.gpus_per_actor,
                                       args.actors)
                report[part] = ingest(spec, args.corpus, args.ingest_count, work / "ingest", args.executor)
        except Exception as error:  # one part failing leaves the others' figures
            failed.append(part)
            report[part] = {"error": f"{type(error).__name__}: {error}"}
            print(f"  {part} failed: {report[part]['error']}", flush=True)
        (args.out / "gpu_ray.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
