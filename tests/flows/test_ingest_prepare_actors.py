"""A Ray ingestion's actor pools: how many prepare actors (read and chunk shards) it starts (the chunk step's
``concurrency``, else one per 4 CPUs of the cluster: one could not keep four embed actors on a GPU busy,
docs/ingestion.md), and what each embed actor asks of Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.ingestion import ingest
from flows.ingestion.plan import build_plan
from flows.ingestion.ray_pipeline import embed_resources, prepare_pool_size
from flows.spec import FlowSpec
from operators.errors import SpecError

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample" / "corpus.jsonl"


def _spec(chunk_concurrency: int | None) -> dict:
    spec = FlowSpec.load("ingest").to_dict()
    spec["steps"]["chunk"]["params"] = {"unit": "tokens", "size": 48, "overlap": 8}
    if chunk_concurrency is not None:
        spec["steps"]["chunk"]["concurrency"] = chunk_concurrency
    spec["index_settings"] = {"dense": False}  # BM25 only: no model to load
    return spec


@pytest.mark.parametrize("cpus, shards, concurrency, actors", [
    (2, 100, None, 1),  # these machines: one, as before
    (16, 100, None, 4),  # the H200's node: four
    (16, 3, None, 3),  # never more than there are shards
    (2, 100, 3, 3),  # the chunk step's concurrency, whatever the CPUs
    (64, 2, 8, 2),
])
def test_one_prepare_actor_per_four_cpus_unless_the_chunk_step_says(cpus, shards, concurrency, actors):
    assert prepare_pool_size({"CPU": float(cpus)}, shards, concurrency) == actors


@pytest.mark.parametrize("options, cluster, pool", [
    ({"num_cpus": 1, "num_gpus": 0.25}, {"CPU": 16, "GPU": 1}, (4, None, 0.25)),  # Ray Data's own 1 CPU a GPU actor
    ({"num_cpus": 2, "num_gpus": 1}, {"CPU": 16, "GPU": 2}, (2, 2, 1)),  # another count is the step's to ask
    ({"concurrency": 3, "num_cpus": 1, "num_gpus": 1}, {"CPU": 16, "GPU": 1}, (3, None, 1)),
    ({"num_cpus": 1}, {"CPU": 2}, (2, 1, 0)),  # these machines: an actor per core
    ({"num_cpus": 1, "num_gpus": 1}, {"CPU": 2}, (2, 1, 0)),  # no GPU in the cluster: on the CPUs, said below
])
def test_each_embed_actor_asks_for_the_steps_resources_and_no_cpu_beside_a_gpu_that_ray_adds_itself(
        options, cluster, pool, caplog):
    assert embed_resources(options, cluster, n_shards=184) == pool
    assert ("embedding on CPUs" in caplog.text) == (options.get("num_gpus", 0) > cluster.get("GPU", 0))


def test_the_chunk_steps_concurrency_reaches_the_plan(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[0], encoding="utf-8")
    assert build_plan(_spec(3), corpus, None).chunk_concurrency == 3
    assert build_plan(_spec(None), corpus, None).chunk_concurrency is None
    with pytest.raises(SpecError, match="steps.chunk.concurrency"):
        build_plan(_spec(0), corpus, None)


def _map_workers() -> set[str]:
    """The ids of Ray Data's pool actors (``_MapWorker``) the GCS knows of, started or not, alive or not."""
    from ray._private import state

    return {actor_id for actor_id, actor in state.actors().items() if "MapWorker" in actor["ActorClassName"]}


@pytest.mark.ray
def test_two_prepare_actors_ingest_what_one_process_does(tmp_path, ray_session, committed_docnos):
    corpus = tmp_path / "corpus60.jsonl"
    corpus.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:60]), encoding="utf-8")
    local = ingest(corpus, tmp_path / "local", spec=_spec(None), shard_size=10, executor="local", progress=False)
    counts = {}
    for concurrency in (None, 2):
        before = _map_workers()
        report = ingest(corpus, tmp_path / f"ray-{concurrency}", spec=_spec(concurrency), shard_size=10,
                        executor="ray", progress=False)
        counts[concurrency] = len(_map_workers() - before)  # created for this ingestion (a pool makes all at once)
        assert report.chunks == local.chunks and report.shards_written == 6
        assert committed_docnos(tmp_path / f"ray-{concurrency}") == committed_docnos(tmp_path / "local")
    # BM25 only: a prepare pool and a write pool of 2 (the session's CPUs); the chunk step's concurrency adds one
    assert counts == {None: 3, 2: 4}
