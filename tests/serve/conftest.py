"""A real Ray Serve app on localhost for the serve tests: MiniLM, an untrained-head cross-encoder, ColBERT,
and a configured model whose weights are absent. One app serves every module of this package (starting it
takes half a minute); a test that deploys an app of its own gives it its own name and route prefix."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def ce_path(untrained_ce) -> str:
    """A real CrossEncoder checkpoint on disk (the packaged MiniLM with a seeded, untrained head; the session's)."""
    return str(untrained_ce)


@pytest.fixture(scope="session")
def colbert_path(tmp_path_factory) -> str:
    """A ColBERT checkpoint (the packaged MiniLM with a seeded, untrained projection)."""
    from operators.models.colbert import new_colbert

    return str(new_colbert("minilm").save(tmp_path_factory.mktemp("serve-models") / "colbert"))


def app_args(ce: str, colbert: str) -> dict:
    fast = {"max_batch_size": 8, "batch_wait_timeout_s": 0.05}
    models = [
        {"name": "all-MiniLM-L6-v2", "aliases": ["minilm", "sentence-transformers/all-MiniLM-L6-v2"],
         "op": "embed.sentence_transformer",
         "params": {"model": "all-MiniLM-L6-v2"}, "num_cpus": 0.5, "num_gpus": 0, "batching": fast},
        {"name": "tessera-cross-encoder", "op": "rerank.cross_encoder", "params": {"model": ce}, "num_cpus": 0.5,
         "num_gpus": 0, "batching": fast},
        {"name": "absent-ce", "op": "rerank.cross_encoder", "params": {"model": "no-such-model-anywhere"}},
        {"name": "tessera-colbert", "op": "rerank.colbert", "params": {"model": colbert}, "num_cpus": 0.5,
         "num_gpus": 0, "batching": fast},
    ]
    return {"models": models}


@pytest.fixture(scope="package")
def serve_app(ray_session, ce_path, colbert_path):
    """Serve on 127.0.0.1:<free port> with the app ``tessera``; yields its base URL; shut down after the package
    (tests/serve has an ``__init__.py`` for that: without one, pytest keeps a package fixture to the session)."""
    from ray import serve

    from serve.app import build_app

    port = free_port()
    quiet = {"log_level": "WARNING"}
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config=quiet)
    try:
        serve.run(build_app(app_args(ce_path, colbert_path)), name="tessera", route_prefix="/", logging_config=quiet)
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]
