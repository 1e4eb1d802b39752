"""cluster/runtime_env.yaml, the working directory ``ray job submit`` uploads from a clone
(docs/cluster.md#what-a-job-uploads), packaged with Ray's own code (what the job client runs before it uploads) and
without the clone's ``.gitignore`` (Ray reads it only where one is there and Ray is not told to skip it): its excludes
leave out what Tessera writes into a clone by default, found where it is written (the Makefile, the benchmark
scripts' defaults, the CLI's defaults, the commands the docs give), and keep every tracked file. A job submitted
after another job, or after a benchmark, uploaded the first one's outputs with the code."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
#: The options whose values Tessera writes (``check_job_paths``'s outputs); ``--index`` only for an ingestion.
OUTPUT_OPTIONS = ("--out", "-o", "--output", "--index-dir", "--cache-dir", "--json")
DOCS = [REPO / "README.md", REPO / "cluster" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def excludes() -> list[str]:
    return yaml.safe_load((REPO / "cluster" / "runtime_env.yaml").read_text(encoding="utf-8"))["excludes"]


def relative(value: str) -> str | None:
    """``value`` as a path under the clone's root (``$PWD/`` dropped); None for an absolute path, a URI, a
    placeholder (``DIR``, ``<set>``) or an index name (resolved under ``$TESSERA_HOME/indices``)."""
    value = value.removeprefix("$PWD/").rstrip("/")
    if not value or value.startswith(("/", "~", "$", "-")) or "://" in value or re.search(r"[<>|=\[\]{}]", value):
        return None
    if value.upper() == value or value.startswith(".."):  # FILE, DIR, INDEX: placeholders
        return None
    return value


def makefile_outputs() -> set[str]:
    """``make demo``'s index (``DEMO_INDEX``), in the clone."""
    return {value for value in re.findall(r"^DEMO_INDEX \?= (\S+)$", (REPO / "Makefile").read_text(), re.M)
            if relative(value)}


def benchmark_defaults() -> set[str]:
    """The default output of each script in benchmarks/ that writes into the clone: an ``add_argument`` of an output
    option whose default is a relative path, or one under the repository's root (``REPO_ROOT / "x"``)."""
    found = set()
    for script in sorted((REPO / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"):
                continue
            names = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
            default = next((kw.value for kw in node.keywords if kw.arg == "default"), None)
            if not set(names) & {*OUTPUT_OPTIONS, "--work"} or default is None:
                continue
            text = ast.unparse(default)
            if (under_root := re.search(r"REPO_ROOT / ['\"]([^'\"]+)['\"]", text)) is not None:
                found.add(under_root.group(1))
            elif (literal := re.fullmatch(r"(?:Path\()?['\"]([^'\"]+)['\"]\)?", text)) and relative(literal.group(1)):
                found.add(literal.group(1))
    return found


def cli_defaults() -> set[str]:
    """Relative defaults of the output options of every ``tessera`` subcommand (the real parser)."""
    from flows.commands import build_parser

    found = set()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                for option in command._actions:
                    if set(option.option_strings) & set(OUTPUT_OPTIONS) and isinstance(option.default, (str, Path)):
                        found |= {str(option.default)} if relative(str(option.default)) else set()
    return found


def documented_outputs() -> set[str]:
    """What the commands in the docs write into the clone: the relative values of output options (and of an
    ingestion's ``--index`` when it is a path), in lines that run ``tessera`` or a job entry point."""
    from operators.store.layout import is_index_name

    option = re.compile(r'(?<![\w-])(--out|-o|--output|--index-dir|--cache-dir|--index)[ =]"?([^\s"\'`)]+)')
    found = set()
    for doc in DOCS:
        for line in doc.read_text(encoding="utf-8").replace("\\\n", " ").splitlines():
            if "tessera " not in line and "python -m flows" not in line:
                continue
            for name, value in option.findall(line):
                path = relative(value)
                if path is None or (name == "--index" and ("ingest" not in line or is_index_name(path))):
                    continue
                found.add(path)
    return found


def written_into_the_clone() -> set[str]:
    return makefile_outputs() | benchmark_defaults() | cli_defaults() | documented_outputs()


def test_the_outputs_are_found_where_they_are_written():
    """The finders find what they are for (a finder that found nothing would pass everything below)."""
    assert ".tessera/indices/sample" in makefile_outputs()
    assert {"bench-train", "gpu-check"} <= benchmark_defaults()
    assert {"results.parquet", "bench-scifact", "res.trec"} <= documented_outputs()


def test_a_jobs_upload_leaves_out_what_tessera_wrote_into_the_clone(tmp_path):
    from ray._private.runtime_env.packaging import create_package

    clone = tmp_path / "clone"
    code = ["flows/__init__.py", "operators/__init__.py", "serve/__init__.py", "data/sample/corpus.jsonl",
            "pyproject.toml"]
    written = sorted(written_into_the_clone() | {"tessera.pgpass"})  # a password file left in the clone
    for path in [*code, *written]:
        file = clone / path if Path(path).suffix else clone / path / "written.bin"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("x")
    package = tmp_path / "package.zip"
    create_package(str(clone), package, include_gitignore=False, excludes=excludes())
    uploaded = set(zipfile.ZipFile(package).namelist())
    assert set(code) <= uploaded, sorted(uploaded)
    left_in = [path for path in written if any(name == path or name.startswith(f"{path}/") for name in uploaded)]
    assert not left_in, f"cluster/runtime_env.yaml's excludes do not cover {left_in}"


def test_no_tracked_file_is_left_out():
    """Ray's own rule (a path is left out when it or a folder above it matches): the code, the sample data, the
    docs and the tests all go up."""
    from ray._private.runtime_env.packaging import _get_excludes

    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    left_out = _get_excludes(REPO, excludes())
    dropped = []
    for name in filter(None, listed.decode().split("\0")):
        parts = Path(name).parts
        if any(left_out(REPO.joinpath(*parts[:n])) for n in range(1, len(parts) + 1)):
            dropped.append(name)
    assert not dropped, dropped
