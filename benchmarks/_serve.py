"""The real Serve app on 127.0.0.1 for the serve benchmarks: Ray on its own temp dir, a free port, the flow
routes over the sample index, a task store in a temp folder, and optionally an API key."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import CACHE, REPO_ROOT

SAMPLE = REPO_ROOT / "data" / "sample"


def sample_index(path: Path | None = None) -> Path:
    """The given index, the demo's if `make demo` built it, else the sample ingested once into the cache (by any
    checkout: a second ingest of the same documents from another checkout's copy would clash on their docnos)."""
    from flows.api import ingest

    target = CACHE / "sample-index"
    for candidate in (path, REPO_ROOT / ".tessera" / "indices" / "sample", target):
        if candidate is not None and (candidate / "manifest.json").is_file():
            return candidate
    ingest(SAMPLE / "corpus.jsonl", target, shard_size=250, progress=False)
    return target


@contextlib.contextmanager
def serve_app(index: Path, *, key: str | None = None, service: dict[str, Any] | None = None,
              models: list[dict[str, Any]] | None = None, llms: list[dict[str, Any]] | None = None,
              num_cpus: int = 2) -> Iterator[str]:
    """Start the app (``serve.app:build_app``) and yield its base URL; Serve and Ray are shut down after.

    ``key``: the one raw API key (``TESSERA_API_KEYS``, read when the app is built); ``service``: more
    ``args.service`` fields (limits...); ``models`` and ``llms``: the app's deployments. ``$TESSERA_HOME`` is a
    temp folder, so saved flows and tasks are the run's."""
    import ray
    from ray import serve

    from serve.app import build_app

    home = Path(tempfile.mkdtemp(prefix="tessera-bench-"))
    os.environ["TESSERA_HOME"] = str(home)
    if key is not None:
        os.environ["TESSERA_API_KEYS"] = key
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.ERROR,
             _temp_dir=str(home / "ray"))
    quiet = {"log_level": "WARNING"}
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config=quiet)
        started = time.perf_counter()
        args = {"default_index": str(index), "task_store": f"sqlite:///{home / 'tasks.db'}", **(service or {})}
        serve.run(build_app({"models": models or [], "llms": llms or [], "service": args}), name="tessera",
                  route_prefix="/", logging_config=quiet)
        print(f"serve app ready in {time.perf_counter() - started:.0f} s on 127.0.0.1:{port}, index {index}")
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()
