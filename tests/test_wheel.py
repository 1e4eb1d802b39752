"""Tessera as a user meets it after ``pip install`` of the wheel, in a folder of his own, far from the repository.

tests/test_packaging.py checks statically that pyproject's package-data names every data file; this builds the
wheel of this checkout (``pip wheel --no-deps --no-build-isolation``: nothing is downloaded), installs it into a venv
of its own that borrows this environment's installed dependencies (a ``.pth`` file) but cannot import the checkout,
and runs the ``tessera`` script it installed from an empty folder: what the commands read comes from the wheel, and
what they tell the user to do is something he can do there (no ``make demo``, no ``serve/config.yaml`` of the
repository, no site-packages searched for his files).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.test_packaging import ROOT, _tracked_data_files

pytestmark = [pytest.mark.slow, pytest.mark.process]

#: What a wheel is built from: the packages and the files pyproject.toml reads (docs/: its data-files).
SOURCES = ("flows", "operators", "serve", "docs", "pyproject.toml", "README.md", "LICENSE")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A venv with this checkout's wheel installed: its ``tessera``, its site-packages, the environment to run in."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"  # a copy: building in the checkout would leave build/ and an egg-info there
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                            if (ROOT / name).is_dir() else {}))
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "TESSERA_DEBUG")}
    env |= {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"),
                  str(source)], work, env)
    if built.returncode != 0:
        pytest.skip(f"the wheel cannot be built here without downloading (pip wheel: {built.stderr.strip()[-300:]})")
    [wheel] = (work / "dist").glob("tessera-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    # the installed dependencies, after the venv's own packages; the checkout's editable finder is in a .pth file
    # of that folder, which a folder named by a .pth line does not run
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
                 str(wheel)], work, env)
    assert done.returncode == 0, done.stderr
    user = work / "user"  # the user's own folder: no serve/, no data/, no .tessera/
    user.mkdir()
    env |= {"TESSERA_HOME": str(work / "home"), "COLUMNS": "160"}
    return {"tessera": str(venv / "bin" / "tessera"), "python": str(venv / "bin" / "python"), "site": site,
            "user": user, "env": env, "venv": venv}


def tessera(installed: dict, *args: str, check: int = 0) -> subprocess.CompletedProcess:
    proc = _run([installed["tessera"], *args], installed["user"], installed["env"])
    assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def test_the_wheel_holds_every_data_file_and_the_checkout_is_not_imported(installed):
    where = _run([installed["python"], "-c", "import flows, operators, serve; print(flows.__file__); "
                  "print(operators.__file__); print(serve.__file__)"], installed["user"], installed["env"])
    assert where.returncode == 0, where.stderr
    assert all(Path(line).is_relative_to(installed["site"]) for line in where.stdout.split()), where.stdout
    missing = [path for package in ("flows", "operators", "serve") for path in _tracked_data_files(package)
               if not (installed["site"] / path).is_file()]
    assert not missing, f"{missing} are not in the installed wheel"


def test_the_commands_read_the_packaged_files_from_a_folder_of_ones_own(installed):
    shown = tessera(installed, "flows", "show", "hybrid")
    assert shown.stdout.startswith(f"# {installed['site'] / 'flows' / 'specs' / 'hybrid.yaml'}"), shown.stdout
    config = tessera(installed, "serve", "--print-config")  # the packaged config, its default index made absolute
    assert f"default_index: {installed['user'] / '.tessera' / 'indices' / 'sample'}" in config.stdout
    models = json.loads(tessera(installed, "models", "--json").stdout)["models"]
    assert "local" in {model["alias"] for model in models}, models  # the packaged aliases
    assert "retrieve.bm25" in tessera(installed, "ops", "retrieve.bm25").stdout


def test_a_corpus_ingested_and_searched_with_the_installed_command(installed):
    corpus = installed["user"] / "docs.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in [
        {"_id": "bee", "title": "Bee", "text": "Honey bees make honey from the nectar of flowers."},
        {"_id": "ant", "title": "Ant", "text": "Ants live in colonies and build nests underground."}]))
    tessera(installed, "ingest", "--source", "docs.jsonl", "--index", "mine", "--no-dense", "--quiet")
    ran = json.loads(tessera(installed, "run", "bm25", "--index", "mine", "--queries", "honey", "--json").stdout)
    assert [row["docno"] for row in ran["rows"]][:1] == ["bee#0"], ran


def test_what_the_errors_tell_a_user_of_the_wheel_is_something_he_can_do(installed):
    """No ``make demo`` (no Makefile here) and no site-packages (no place for his files)."""
    chat = tessera(installed, "chat", check=2)
    assert "tessera ingest --source FILE --index sample makes the second, from any folder" in chat.stderr
    assert "make demo" not in chat.stderr
    (installed["user"] / "c.yaml").write_text("name: c\nsteps:\n  r: {op: retrieve.corpus_bm25}\n")
    corpus = tessera(installed, "run", "c.yaml", "--queries", "honey", check=2)
    assert f"corpus file not found: data/sample/corpus.jsonl (looked in {installed['user']})" in corpus.stderr
    assert "site-packages" not in corpus.stderr


def test_the_page_an_error_points_to_opens_with_the_command_it_names(installed):
    """``see docs/operators.md`` led a user of the wheel nowhere: it has no docs/. The wheel installs the pages in the
    venv's share/tessera/docs, and the pointer names the command that prints them from any folder."""
    pages = (installed["venv"] / "share" / "tessera" / "docs").resolve()
    (installed["user"] / "p.yaml").write_text("name: p\nsteps:\n  r: {op: mylab.search}\n")
    refused = tessera(installed, "run", "p.yaml", "--queries", "honey", check=2).stderr
    pointer = re.search(r"see docs/(\w+)\.md \(`tessera docs (\w+)`\)", refused)
    assert pointer and pointer.group(1) == pointer.group(2) == "operators", refused
    shown = tessera(installed, "docs", pointer.group(2)).stdout
    assert shown == (ROOT / "docs" / "operators.md").read_text(encoding="utf-8")
    assert tessera(installed, "docs", "docs/caching.md", "--path").stdout == f"{pages / 'caching.md'}\n"
    listed = tessera(installed, "docs").stdout.splitlines()
    assert listed[0] == f"{len(list((ROOT / 'docs').glob('*.md')))} pages in {pages} (tessera docs PAGE prints one):"
    assert "  caching        The step cache" in listed, listed
