"""Paths in a Ray job (``ray job submit``), checked before anything runs (docs/cluster.md, "Paths in a job").

A job submitted with a working directory (``--runtime-env cluster/runtime_env.yaml``, ``--working-dir``) runs in a
temporary copy of it, which Ray deletes with the session; one submitted without runs in the folder ``ray start`` ran
in on the driver's node (on a launcher's head, the home folder). A relative path means a different place in each, so
the messages say which."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from flows.commands._support import CliError

#: The variable Ray's job supervisor gives a job's entrypoint: the job's config, its runtime env among it.
JOB_CONFIG = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def in_ray_job() -> bool:
    """Whether this process is a Ray job's entrypoint (``ray job submit``): Ray's job supervisor sets the variable."""
    return JOB_CONFIG in os.environ


def job_has_working_dir() -> bool:
    """Whether this Ray job runs in an uploaded working directory (its runtime env's ``working_dir``, a package URI
    once uploaded), not in the folder ``ray start`` ran in."""
    try:
        config = json.loads(os.environ.get(JOB_CONFIG) or "{}")
    except ValueError:
        return True  # not Ray's: the messages of the usual case
    runtime_env = config.get("runtime_env") if isinstance(config, dict) else None
    return bool(isinstance(runtime_env, dict) and runtime_env.get("working_dir"))


def check_job_paths(*, outputs: dict[str, Any] | None = None, inputs: dict[str, Any] | None = None,
                    executor: str | None = None) -> None:
    """In a Ray job, relative paths point into the job's working folder on the node that runs it: the temporary copy
    of its uploaded working directory (Ray deletes it with the session; its upload leaves out git-ignored files,
    ``.tessera/`` among them), or without one the folder ``ray start`` ran in. So in a job a relative output is
    refused, and a relative input that is not there says why, each before anything runs, in one line.
    ``{option: value}``; ``--index`` may also be a name under ``$TESSERA_HOME/indices``. A URI (``flows.uris``) is
    checked for its scheme, in a job or not, and with ``executor="ray"`` the cluster ``RAY_ADDRESS`` names
    (``flows.executors.ray_address``)."""
    from flows import uris
    from operators.store import resolve_index
    from operators.store.layout import is_index_name

    for option, value in {**(outputs or {}), **(inputs or {})}.items():
        if uris.is_uri(value):
            uris.check_scheme(value, option.lstrip("-"))  # everywhere, before anything runs
    if executor == "ray":  # a job-server address or a stopped cluster: before an ingestion stages its corpus
        from flows.executors.ray_address import check_ray_address

        check_ray_address(ahead=True)  # the run's ray.init takes it as checked: one probe
    if not in_ray_job():
        return

    def path(option: str, value: Any) -> Path:  # as given: a relative path stays relative
        return resolve_index(value) if option == "--index" and is_index_name(value) else Path(value).expanduser()

    outputs = {k: v for k, v in (outputs or {}).items() if not uris.is_uri(v)}  # a URI is absolute
    inputs = {k: v for k, v in (inputs or {}).items() if not uris.is_uri(v)}
    for option, value in outputs.items():
        if value and not path(option, value).is_absolute():
            raise CliError(f"{option} '{value}' is relative: in a Ray job it would be written {relative_lands()}; "
                           "give an absolute path the cluster can write "
                           f"(on a local cluster: {option} {under_pwd(value)})", field=option.lstrip("-"))
    for option, value in inputs.items():
        if value and not path(option, value).is_absolute() and not path(option, value).exists():
            raise CliError(_missing_input(option, value, job_has_working_dir()), field=option.lstrip("-"))


def under_pwd(value: str) -> str:
    """``value`` under ``$PWD`` as a shell reads it: ``"$PWD/my data.jsonl"``; a name with a character that double
    quotes do not keep (``"``, ``$``, a backquote, ``\\``) is quoted on its own: ``"$PWD"/'say "hi".jsonl'``."""
    return f'"$PWD"/{shlex.quote(value)}' if any(ch in value for ch in '"$`\\') else f'"$PWD/{value}"'


def relative_lands() -> str:
    """Where a relative output of this Ray job would be written, and what becomes of it, for a refusal's message."""
    if job_has_working_dir():
        return "into the job's temporary working directory and lost"
    return (f"into {os.getcwd()}, the folder `ray start` ran in on the node that runs the job's driver (the job was "
            "submitted without a working directory)")


def _missing_input(option: str, value: str, uploaded: bool) -> str:
    """Why a relative input is not where a job reads it, and what to give instead."""
    absolute = f"give an absolute path the cluster can read (on a local cluster: {option} {under_pwd(value)})"
    if not uploaded:  # no copy of anything: the job reads where `ray start` ran (README, section 3)
        return (f"{option} '{value}' is not in {os.getcwd()}, where this Ray job runs: it was submitted without a "
                "working directory, so a relative path is read from the folder `ray start` ran in on the node that "
                "runs the job's driver; the path is mistyped, or it is in your clone: submit from the clone's root "
                f"with --runtime-env cluster/runtime_env.yaml to upload it, or {absolute}")
    missing = f"{option} '{value}' is not in this Ray job's copy of the working directory"
    if ".." in Path(value).parts:  # the upload holds the working directory, nothing above it
        return (f"{missing} (it leads out of the working directory, and the job's upload holds only what is inside "
                f"it): {absolute}")
    # Ray's upload rules (.gitignore, .rayignore, excludes) are its own: both causes are named
    return (f"{missing}: the path is mistyped, or the job's upload left it out (it leaves out git-ignored files and "
            f"the runtime env's excludes, such as .tessera/); if it is there where you submitted, {absolute}")
