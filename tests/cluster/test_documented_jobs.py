"""Every ``ray job submit`` the docs show, parsed as ``ray job submit`` parses it (Ray's own click command and its
runtime-env options) and its entry point by Tessera's parser, offline. cluster/README.md's AWS jobs need no
``--runtime-env`` and it says to add ``--runtime-env cluster/runtime_env.yaml`` to ship local changes: its bench job
gave ``--runtime-env-json`` for TESSERA_HOME, and with the file added Ray refused it (``Only one of --runtime_env and
--runtime-env-json can be provided``, a traceback). So each such command is checked with the file added too."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "cluster" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUNTIME_ENV = "cluster/runtime_env.yaml"


def documented_submits() -> list[tuple[str, str]]:
    """``(doc name, command)`` for each ``ray job submit`` line of a bash block, its continuations joined."""
    found = []
    for doc in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            for command in block.replace("\\\n", " ").splitlines():
                command = command.split(" #")[0].strip()
                if command.startswith("ray job submit"):
                    found.append((doc.relative_to(REPO).as_posix(), command))
    return found


SUBMITS = documented_submits()


def ray_options(command: str) -> tuple[dict, str]:
    """The options of ``ray job submit`` as Ray's CLI parses them, and the entry point after ``--``."""
    from ray.dashboard.modules.job.cli import submit

    words = shlex.split(command.replace("$PWD", str(REPO)))
    dashes = words.index("--")
    context = submit.make_context("submit", words[3:dashes] + ["--", "true"])
    return context.params, shlex.join(words[dashes + 1:])


def runtime_env_of(params: dict) -> dict:
    """The runtime env ``ray job submit`` sends (Ray's own merge of ``--runtime-env``, its JSON and the folder),
    read from the clone's root as the docs say to submit from."""
    from ray.dashboard.modules.dashboard_sdk import parse_runtime_env_args

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        return parse_runtime_env_args(runtime_env=params["runtime_env"], runtime_env_json=params["runtime_env_json"],
                                      working_dir=params["working_dir"])


def test_the_docs_show_the_jobs_of_every_entry_point():
    modules = {shlex.split(command.split(" -- ", 1)[1])[2] for _, command in SUBMITS}
    assert {"flows.run", "flows.ingest", "flows.bench", "flows.train"} <= modules, modules


@pytest.mark.parametrize("doc, command", SUBMITS, ids=[f"{d}:{c[15:60]}" for d, c in SUBMITS])
def test_a_documented_job_parses_as_ray_and_tessera_read_it(doc, command, parse_entrypoint):
    params, entrypoint = ray_options(command)
    runtime_env_of(params)
    parse_entrypoint(entrypoint)


@pytest.mark.parametrize("doc, command", [(d, c) for d, c in SUBMITS if "--runtime-env " not in c],
                         ids=[f"{d}:{c[15:60]}" for d, c in SUBMITS if "--runtime-env " not in c])
def test_a_job_without_the_runtime_env_file_takes_it_added(doc, command):
    """cluster/README.md: "pass --runtime-env cluster/runtime_env.yaml to ship local changes with a job"."""
    params, _ = ray_options(command.replace("ray job submit", f"ray job submit --runtime-env {RUNTIME_ENV}", 1))
    assert runtime_env_of(params)["working_dir"] == "."
