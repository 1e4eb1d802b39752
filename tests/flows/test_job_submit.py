"""docs/cluster.md's local-cluster ``ray job submit`` command, run as written against a real local Ray head; paths
in a job.

The head is the flows conftest's ``ray_head``: ``ray start --head --block`` on free ports with its
own temp dir, under Ray's default authentication, stopped by its PID.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]
CLUSTER_DOC = REPO / "docs" / "cluster.md"  # "A local cluster"; the README links there (it held this block once)


def documented_job_lines() -> tuple[str, str]:
    """The local-cluster block of docs/cluster.md: its ``export RAY_AUTH_MODE`` line and its ``ray job submit``."""
    block = next(b for b in re.findall(r"```bash\n(.*?)```", CLUSTER_DOC.read_text(encoding="utf-8"), flags=re.S)
                 if "ray job submit" in b and "export RAY_AUTH" in b)
    export = next(line.split("#")[0].strip() for line in block.splitlines() if line.startswith("export RAY_AUTH"))
    submit = block[block.index("ray job submit"):].strip()
    return export, submit


# -- in a job, without a cluster: the checks before anything runs ------------------------------------------


def run_in_job(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    """``python -m flows.run ...`` as Ray's job supervisor starts an entrypoint (its job-config variable set), in a
    process of its own: the entry point itself, its stderr as a job's log shows it. The other checks in a job run in
    this process (the ``flows_run_in_job`` fixture)."""
    job_config = json.dumps({"runtime_env": {"working_dir": "gcs://_ray_pkg_0123456789abcdef.zip"}})  # uploaded
    env = {**os.environ, "TESSERA_HOME": str(home), "RAY_JOB_CONFIG_JSON_ENV_VAR": job_config}
    env.pop("TESSERA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "flows.run", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_in_a_job_a_relative_out_is_refused_before_anything_runs(tmp_path, flows_run_in_job):
    before = _stat(REPO / "results.parquet")  # the README's `tessera run demo` (--out results.parquet) may write one
    proc = flows_run_in_job("demo", "--index", str(tmp_path / "nowhere"), "--queries", "honey bees", "--out",
                            "results.parquet", cwd=REPO, home=tmp_path / "home")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--out 'results.parquet' is relative" in lines[0] and '--out "$PWD/results.parquet"' in lines[0]
    assert _stat(REPO / "results.parquet") == before  # not written, nor replaced


def _stat(path: Path) -> tuple[int, int] | None:
    """A file's modification time and size, or None when it is not there."""
    return (path.stat().st_mtime_ns, path.stat().st_size) if path.exists() else None


@pytest.mark.process
def test_in_a_job_a_git_ignored_index_is_one_line_that_says_why(tmp_path, flows_run_in_job):
    job_copy = tmp_path / "job"  # what Ray uploads of a checkout after `make demo`: data/sample, no .tessera/
    shutil.copytree(REPO / "data" / "sample", job_copy / "data" / "sample")
    proc = run_in_job("demo", "--index", ".tessera/indices/sample", "--queries", "data/sample/queries.jsonl",
                      cwd=job_copy, home=tmp_path / "home")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and TRACEBACK not in proc.stderr, proc.stderr
    assert "--index '.tessera/indices/sample' is not in this Ray job's copy of the working directory" in lines[0]
    assert "git-ignored" in lines[0] and '--index "$PWD/.tessera/indices/sample"' in lines[0]
    outside = flows_run_in_job("demo", "--index", "../indices/sample", "--queries", "data/sample/queries.jsonl",
                               cwd=job_copy, home=tmp_path / "home")  # above the working directory: never uploaded
    line, = outside.stderr.strip().splitlines()
    assert outside.returncode == 2 and "leads out of the working directory" in line and "git-ignored" not in line


# -- a real local head ----------------------------------------------------------------------------------------


def clone_after_make_demo(root: Path, sample_index: Path) -> Path:
    """The repository's files (tracked, and new ones git does not ignore) with ``make demo``'s index and a venv
    folder in place: what a user's clone holds when they submit."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    (root / ".tessera" / "indices").mkdir(parents=True)
    (root / ".tessera" / "indices" / "sample").symlink_to(sample_index)
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "big.bin").write_bytes(b"\0" * 1024)
    return root


@pytest.mark.ray
@pytest.mark.slow
def test_the_documented_job_command_runs_as_written_on_a_local_cluster(ray_head, sample_index, tmp_path):
    clone = clone_after_make_demo(tmp_path / "clone", sample_index)
    export, submit = documented_job_lines()
    env = {**ray_head.env, "RAY_ADDRESS": ray_head.address}

    def shell(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=540)

    # Without the documented export the job server refuses the client: authentication is on.
    refused = shell(submit)
    assert refused.returncode != 0 and "Authentication required" in refused.stdout + refused.stderr
    # As written.
    done = shell(f"{export}\n{submit}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (job_id, (status, logs)), = ray_head.job_logs().items()
    assert status == "SUCCEEDED" and job_id in done.stdout + done.stderr
    assert "[1/11] bm25 (retrieve.bm25) done, 80 rows" in logs and "[11/11] terms (analyze.word_count) done" in logs
    assert f"wrote 20 rows to {clone}/results.parquet" in logs and "Token authentication" not in logs
    results = pq.read_table(clone / "results.parquet")
    assert results.num_rows == 20 and sorted(set(results.column("qid").to_pylist())) == ["q1", "q2", "q3", "q4"]
    # What went up: the code and data/sample, not the venv nor .tessera/.
    package, = (p for p in (ray_head.temp_dir / "session_latest" / "runtime_resources" / "working_dir_files").iterdir()
                if p.is_dir())
    assert (package / "flows" / "commands" / "run.py").is_file() and (package / "data" / "sample").is_dir()
    assert not (package / ".venv").exists() and not (package / ".tessera").exists()

    # The index as a relative path was never uploaded: one line that says so, before Ray Data starts.
    relative = submit.replace('"$PWD/.tessera/indices/sample"', ".tessera/indices/sample")
    failed = shell(f"{export}\n{relative}")
    assert failed.returncode != 0
    status, logs = next(v for k, v in ray_head.job_logs().items() if k != job_id)
    errors = [line for line in logs.splitlines() if line.startswith("tessera: ")]
    assert status == "FAILED" and TRACEBACK not in logs and len(errors) == 1, logs
    assert "git-ignored" in errors[0] and "core_worker" not in logs
