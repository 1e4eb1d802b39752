"""In a Ray job, a relative input missing from the job's copy of the working directory: the message names both
causes, a mistyped path and one the upload left out (git-ignored, or the runtime env's excludes), where it said
only the second, so a typo sent the user to look for an upload problem. Run as Ray's job supervisor starts an
entrypoint (its job-config variable set; in this process, the ``flows_run_in_job`` fixture), in a copy of what Ray
uploads of a checkout: its .gitignore and data/sample."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def job_copy(tmp_path) -> Path:
    copy = tmp_path / "job"
    shutil.copytree(REPO / "data" / "sample", copy / "data" / "sample")
    shutil.copy2(REPO / ".gitignore", copy / ".gitignore")
    return copy


@pytest.fixture
def error_line(flows_run_in_job) -> Callable[..., str]:
    """A function: the one line ``python -m flows.run ...`` prints in a job, which must fail with status 2 and no
    traceback (run in this process: the ``flows_run_in_job`` fixture)."""
    def line(*args: str, cwd: Path, home: Path, runtime_env: dict | None = None) -> str:
        proc = flows_run_in_job(*args, cwd=cwd, home=home, runtime_env=runtime_env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and TRACEBACK not in proc.stderr, proc.stderr
        return lines[0]

    return line


def test_a_mistyped_path_is_named_as_possibly_mistyped(job_copy, tmp_path, error_line):
    line = error_line("demo", "--index", str(tmp_path / "nowhere"), "--queries", "data/sample/querys.jsonl",
                      cwd=job_copy, home=tmp_path / "home")
    assert "--queries 'data/sample/querys.jsonl' is not in this Ray job's copy" in line, line
    assert "the path is mistyped, or the job's upload left it out" in line, line


def test_a_git_ignored_path_gets_both_causes_and_the_pwd_advice(job_copy, tmp_path, error_line):
    line = error_line("demo", "--index", ".tessera/indices/sample", "--queries", "data/sample/queries.jsonl",
                      cwd=job_copy, home=tmp_path / "home")
    assert "mistyped" in line and "git-ignored" in line, line
    assert '--index "$PWD/.tessera/indices/sample"' in line, line



# -- a job submitted without a working directory (README, section 3: no --runtime-env) ----------------------------
# It runs in the folder `ray start` ran in, not in a copy of anything: the messages said "this Ray job's copy of the
# working directory" and "the job's upload left it out", of an upload there was not.

NO_WORKING_DIR: dict = {}  # the job config's runtime env of `ray job submit -- python -m flows.run ...`


def test_without_a_working_dir_a_missing_input_names_the_folder_the_job_runs_in(job_copy, tmp_path, error_line):
    line = error_line("demo", "--index", str(tmp_path / "nowhere"), "--queries", "data/sample/querys.jsonl",
                      cwd=job_copy, home=tmp_path / "home", runtime_env=NO_WORKING_DIR)
    assert f"--queries 'data/sample/querys.jsonl' is not in {job_copy}, where this Ray job runs" in line, line
    assert "submitted without a working directory" in line and "--runtime-env cluster/runtime_env.yaml" in line
    assert "copy of the working directory" not in line and "upload left it out" not in line, line


def test_without_a_working_dir_a_relative_out_names_where_it_would_go(job_copy, tmp_path, error_line):
    line = error_line("demo", "--index", str(tmp_path / "nowhere"), "--queries", "data/sample/queries.jsonl",
                      "--out", "results.parquet", cwd=job_copy, home=tmp_path / "home", runtime_env=NO_WORKING_DIR)
    assert f"--out 'results.parquet' is relative: in a Ray job it would be written into {job_copy}, the folder " \
           "`ray start` ran in" in line, line
    assert "temporary working directory" not in line and '--out "$PWD/results.parquet"' in line, line
    assert not (job_copy / "results.parquet").exists()


def test_without_a_working_dir_a_relative_input_that_is_there_is_read(job_copy, tmp_path, error_line):
    line = error_line("demo", "--index", str(tmp_path / "nowhere"), "--queries", "data/sample/queries.jsonl",
                      cwd=job_copy, home=tmp_path / "home", runtime_env=NO_WORKING_DIR)
    assert "no index at" in line and "--queries" not in line, line


@pytest.mark.process  # the shell that reads the advice back
@pytest.mark.parametrize("name", ['say "hi".parquet', "$HOME.parquet", "my results.parquet"])
def test_the_pwd_advice_is_a_path_the_shell_reads_back(job_copy, tmp_path, error_line, name):
    """It wrote ``--out "$PWD/say "hi".parquet"``: the shell ended the quotes at the name's own and expanded its ``$``,
    so the pasted path was another one."""
    import shlex
    import subprocess

    line = error_line("demo", "--index", str(tmp_path / "nowhere"), "--queries", "data/sample/queries.jsonl",
                      "--out", name, cwd=job_copy, home=tmp_path / "home", runtime_env=NO_WORKING_DIR)
    advice = line.split("(on a local cluster: --out ", 1)[1].removesuffix(")")
    said = subprocess.run(["bash", "-c", f"printf %s {advice}"], cwd=job_copy, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nowhere"}).stdout
    assert said == f"{job_copy}/{name}", (advice, shlex.quote(said))
