"""What ``ray up cluster/ray-cluster-aws.yaml`` copies of a clone to every node (its ``file_mounts``): rsync run
locally with the filter arguments Ray's own command runner builds from the file's ``rsync_exclude`` and
``rsync_filter``. They left out ``.gitignore``'s paths, not the outputs Tessera writes into a clone's root
(``results.parquet``, TREC runs, ``bench-*/`` folders with their runs and MLflow store), which went to every node on
each ``ray up``; cluster/runtime_env.yaml leaves those out of a job's upload."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.cluster.test_runtime_env import written_into_the_clone

REPO = Path(__file__).resolve().parents[2]
CODE = ["flows/__init__.py", "operators/__init__.py", "serve/__init__.py", "data/sample/corpus.jsonl",
        "pyproject.toml", "cluster/serve-gpu.yaml", "benchmarks/gpu_check.py", "flows/run/__main__.py"]


def rsync_filter_args(config: dict) -> list[str]:
    from ray.autoscaler._private.command_runner import SSHCommandRunner

    options = {"rsync_exclude": config.get("rsync_exclude"), "rsync_filter": config.get("rsync_filter")}
    return SSHCommandRunner._create_rsync_filter_args(None, options)  # uses nothing of the runner


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
def test_ray_up_copies_the_code_and_not_what_tessera_wrote_into_the_clone(tmp_path):
    config = yaml.safe_load((REPO / "cluster" / "ray-cluster-aws.yaml").read_text(encoding="utf-8"))
    assert list(config["file_mounts"].values())[0] == "."
    clone, node = tmp_path / "clone", tmp_path / "node"
    written = sorted(written_into_the_clone() | {".venv/lib/x.py", ".git/HEAD", "flows/__pycache__/x.pyc"})
    for path in [*CODE, *written]:
        file = clone / path if Path(path).suffix else clone / path / "written.bin"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("x")
    shutil.copy2(REPO / ".gitignore", clone / ".gitignore")
    node.mkdir()
    # As Ray's updater syncs a folder: both paths end in "/".
    subprocess.run(["rsync", "-a", *rsync_filter_args(config), f"{clone}/", f"{node}/"], check=True, timeout=60)
    copied = {p.relative_to(node).as_posix() for p in node.rglob("*") if p.is_file()}
    assert set(CODE) <= copied, sorted(copied)
    left_in = [path for path in written if any(name == path or name.startswith(f"{path}/") for name in copied)]
    assert not left_in, f"ray up copies {left_in} to every node"
