"""Shared fixtures: the evaluation data beside the repo, a fresh step cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Nothing in the tests may reach a model hub: models come from installed packages.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# OpenMP threads that spin while waiting starve the other process on a 2-core machine (a Ray
# actor and the driver both running torch): measured 14 s vs 2.1 s per ColBERT training step.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need it skip with the reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not present at {SHARED_DATA}: evaluation data is not on this machine")
    return SHARED_DATA


@pytest.fixture(scope="module")
def one_torch_thread():
    """Torch on one thread for a module's tests, restored afterwards: its OpenMP threads spin while they
    wait, and on a loaded 2-core machine a ColBERT training step took 14 s on two threads, 1.3 s on one.
    Modules that train or encode with torch say ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def cache(tmp_path):
    from flows.cache import StepCache

    return StepCache(tmp_path / "cache")


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray (2 CPUs) for the whole session; started on first use, stopped at the end."""
    import logging

    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(params=["local", pytest.param("ray", marks=pytest.mark.ray)])
def executor_kind(request):
    """Run a test on each executor; the Ray one shares the session's Ray."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


@pytest.fixture
def make_executor(executor_kind):
    """A factory of the executor under test: ``make_executor(cache=...)``."""

    def make(**kwargs):
        if executor_kind == "ray":
            from flows.executors.ray_data import RayDataExecutor

            return RayDataExecutor(**kwargs)
        from flows.executors.local import LocalExecutor

        return LocalExecutor(**kwargs)

    return make


@pytest.fixture(scope="session")
def sample_workspace(tmp_path_factory) -> Path:
    """A folder laid out as a clone after ``make demo``: ``data/sample`` (a copy of the bundled
    sample) and ``.tessera/indices/sample``, ingested as ``make demo`` and the README's Python tour
    do it (the built-in ingest spec: chunked, BM25 + MiniLM, flat; 250 documents a shard), with the
    local executor; built once per session, so the README's own ``ingest`` call finds it done."""
    import shutil

    from flows.ingestion import ingest

    root = tmp_path_factory.mktemp("workspace")
    shutil.copytree(REPO / "data" / "sample", root / "data" / "sample")
    ingest(root / "data" / "sample" / "corpus.jsonl", root / ".tessera" / "indices" / "sample", spec="ingest",
           shard_size=250, executor="local", progress=False)
    return root


@pytest.fixture(scope="session")
def sample_index(sample_workspace) -> Path:
    """The bundled sample's index (see ``sample_workspace``)."""
    return sample_workspace / ".tessera" / "indices" / "sample"
