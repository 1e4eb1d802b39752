"""The image's install resolves: ``pip install -e ".[gpu,bench,postgres]"`` (cluster/Dockerfile, the launcher's
setup_commands) puts vLLM beside the service, and vLLM pins torch and caps FastAPI. With ``vllm==0.33.0`` (torch
2.14) and ``fastapi==0.165.0`` in the serve extra, pip could not resolve it, and no image or cluster could be built,
while every test passed. pip's resolver, asked here for a dry run against the package index (no download of the
wheels, only their metadata), is the check."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: pip's words for an index it could not reach (no network): the check cannot run, which is not a failure
UNREACHABLE = re.compile(r"NewConnectionError|Max retries exceeded|Temporary failure in name resolution|"
                         r"No matching distribution found for (setuptools|wheel)", re.I)

#: ``slow`` too: it took 25 to 122 s in make test (PyPI's answers) and about 24 CPU-seconds of the resolver, for a
#: property of pyproject.toml that changes only with its pins (make test-all runs it).
pytestmark = [pytest.mark.network, pytest.mark.slow]


def _pins() -> dict[str, str]:
    """``name -> version`` of every ``name==version`` requirement of the base install and its extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {m.group(1).lower(): m.group(2) for r in requirements if (m := re.match(r"([\w.-]+)(?:\[.*\])?==(\S+)", r))}


def test_the_cluster_images_install_resolves_with_the_pins_the_tests_ran_on(tmp_path):
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--disable-pip-version-check", "--report", str(report), f"{ROOT}[gpu,bench,postgres]"],
                          capture_output=True, text=True, timeout=480)
    if done.returncode and UNREACHABLE.search(done.stderr):
        pytest.skip(f"the package index cannot be reached: {UNREACHABLE.search(done.stderr).group(0)}")
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = {item["metadata"]["name"].lower(): item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    pins = _pins()
    assert "vllm" in chosen, "the gpu extra no longer brings vLLM (engine: vllm)"
    for name in ("torch", "fastapi", "ray", "pydantic"):  # the versions the suite ran on, not ones vLLM chose
        assert chosen[name].split("+")[0] == pins[name], (name, chosen[name], pins[name])
