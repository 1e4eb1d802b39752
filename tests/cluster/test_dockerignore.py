"""cluster/Dockerfile.dockerignore, the build context of the KubeRay image (``docker build -f cluster/Dockerfile .``
from a clone). Docker reads no ``.gitignore``: what the file did not name went into the image. It named the venv and
caches but not the outputs Tessera writes into a clone (``results.parquet``, TREC runs, ``bench-*/`` folders with
their runs and MLflow store, ``gpu-check/``) nor the rest of ``.gitignore`` (``*.pyc``, ``out/``), which
cluster/runtime_env.yaml leaves out of a job's upload: a clone after a benchmark built an image holding its outputs.
Matched by Docker's rules: a pattern is anchored at the context's root (``**/`` for any depth), ``*`` stays within
one path segment, and a folder that matches leaves out everything in it."""

from __future__ import annotations

import subprocess
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from tests.cluster.test_runtime_env import written_into_the_clone

REPO = Path(__file__).resolve().parents[2]


def patterns() -> list[str]:
    lines = (REPO / "cluster" / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip().strip("/") for line in lines if line.strip() and not line.startswith("#")]


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """``parts`` matches ``pattern`` segment by segment, ``**`` standing for any number of segments."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[n:], pattern[1:]) for n in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _matches(parts[1:], pattern[1:])


def left_out(path: str) -> bool:
    """Whether Docker leaves ``path`` (relative to the context) out: it, or a folder above it, matches a pattern."""
    parts = Path(path).parts
    return any(_matches(parts[:n], tuple(p.split("/"))) for n in range(1, len(parts) + 1) for p in patterns())


def gitignored_examples() -> list[str]:
    """A path each ``.gitignore`` line leaves out, at the root and, for a pattern without a folder, deeper too."""
    examples = []
    for line in (REPO / ".gitignore").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name = line.strip("/").replace("*", "x")
        examples.append(f"{name}/inside" if line.endswith("/") else name)
        if "/" not in line.rstrip("/"):  # gitignore: at any depth
            examples.append(f"flows/deep/{name}")
    return examples


def test_the_matcher_follows_dockers_rules():
    assert left_out(".venv/lib/x.py") and left_out("flows/__pycache__/a.pyc") and left_out("results.parquet")
    assert not left_out("flows/results.parquet")  # anchored at the root, as Docker anchors it
    assert not left_out("flows/__init__.py") and not left_out("pyproject.toml")


@pytest.mark.parametrize("path", sorted(written_into_the_clone() | {"tessera.pgpass", "bench-scifact/mlflow.db"}))
def test_what_tessera_writes_into_a_clone_stays_out_of_the_image(path):
    assert left_out(path), f"cluster/Dockerfile.dockerignore does not leave out {path}"


@pytest.mark.parametrize("path", gitignored_examples())
def test_what_git_ignores_stays_out_of_the_image(path):
    assert left_out(path), f"cluster/Dockerfile.dockerignore does not leave out {path}, which .gitignore does"


def test_every_tracked_file_goes_into_the_image():
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    dropped = [name for name in filter(None, listed.decode().split("\0")) if left_out(name)]
    assert not dropped, dropped
