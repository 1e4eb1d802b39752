"""benchmarks/gpu_ray.py's ingest spec: the built-in ingest flow with its encoder on a shared GPU, as the
ingestion plans it (the device call has no time to find a spec the ingestion refuses)."""

from __future__ import annotations

import sys
from pathlib import Path

from flows.ingestion.plan import build_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the scripts import their helpers so
from gpu_ray import gpu_ingest_spec  # noqa: E402


def test_the_gpu_ingest_spec_puts_four_actors_on_one_gpu_with_the_steps_of_ingest(tmp_path):
    model = tmp_path / "minilm-random"
    spec = gpu_ingest_spec(model, tmp_path, "cuda", "float16", 512, 0.25, 4)
    plan = build_plan(spec, None, None)
    builtin = build_plan("ingest", None, None)
    assert plan.embed_options == {"num_cpus": 1, "num_gpus": 0.25, "concurrency": 4, "batch_size": 1024}
    assert plan.embed == {**builtin.embed, "model": str(model), "device": "cuda", "dtype": "float16",
                          "encode_batch_size": 512}
    # the chunks counted in the carried model's pieces: the packaged MiniLM is not on the GPU machine
    assert plan.chunk == {**builtin.chunk, "tokenizer": str(model)} and type(plan.read) is type(builtin.read)
    assert plan.settings_base == {**builtin.settings_base, "encoder": str(model)}
