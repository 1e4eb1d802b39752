"""The first ingestion into a folder, interrupted (or still running) before its first commit: there is no manifest
yet, so opening the folder raises the store's ``UnfinishedFirstIngestError`` (its staging folder and source), and
``pending``, which reads an opened index's settings, does not apply. The run records the settings it creates the
index with beside its staging (``record_settings``), and where the error reaches a command (``tessera``'s error
line, ``tessera index list``) ``with_resume`` adds the command that resumes the ingestion with them, built by
``pending.resume_command_of`` as an unfinished ingestion's is: ``--no-bm25``, ``--dense-type``, a ``--spec`` of the
run's own reader, and so on, which the store alone could not say."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from operators.errors import TesseraError, in_chain
from operators.store.errors import UnfinishedFirstIngestError

#: In a source's staging folder: the settings of the index its first ingestion creates.
SETTINGS_FILE = "index_settings.json"
#: Settings that ``resume_command_of`` says as options (``dim`` follows from the encoder); another that differs from
#: its default goes in the ``--spec`` as ``index_settings``.
_AS_OPTIONS = frozenset({"dense", "bm25", "dense_type", "dim"})


def record_settings(staging: Path, settings: Any) -> None:
    """Keep ``settings`` (an ``IndexSettings``) in ``staging``: a first ingestion interrupted before its first
    commit leaves no manifest to read them from."""
    from operators.atomic import write_bytes

    write_bytes(staging / SETTINGS_FILE, settings.model_dump_json().encode())


def resume_command(err: UnfinishedFirstIngestError) -> str:
    """The ``tessera ingest`` that resumes the first ingestion ``err`` is about, with the settings it recorded (one
    staged by an earlier release recorded none: ``--no-dense`` as its ``job.json`` says, the rest defaults)."""
    from pydantic import ValidationError

    from flows.ingestion.job_params import JOB_FILE
    from flows.ingestion.pending import read_json_or_none, resume_command_of
    from flows.ingestion.staging import STATE_FILE
    from operators.store.settings import IndexSettings

    state, job = read_json_or_none(err.staging / STATE_FILE), read_json_or_none(err.staging / JOB_FILE)
    try:
        settings = IndexSettings.model_validate(read_json_or_none(err.staging / SETTINGS_FILE))
    except ValidationError:  # none recorded (None), or not readable
        settings = IndexSettings(dense=not (isinstance(job, dict) and job.get("embed", {}) is None))
    default = IndexSettings().model_dump()
    others = {k: v for k, v in settings.model_dump().items() if k not in _AS_OPTIONS and v != default[k]}
    return resume_command_of(err.path, settings, err.staging.name, err.source, state, job, index_settings=others)


def python_call(command: str) -> str:
    """The ``flows.api.ingest(...)`` call that does what ``command`` (a ``resume_command``) does: a Python caller
    told to run a shell command had to translate its options (``--no-dense`` is ``settings={'dense': False}``,
    which a resume without it does not keep: the index became a dense one)."""
    import argparse
    import json
    import shlex

    parser = argparse.ArgumentParser(add_help=False)
    for option in ("--source", "--index", "--spec", "--dense-type"):
        parser.add_argument(option)
    parser.add_argument("--shard-size", type=int)
    for flag in ("--no-dense", "--no-bm25", "--no-chunk", "--replace"):
        parser.add_argument(flag, action="store_true")
    args, others = parser.parse_known_args(shlex.split(command)[2:])  # after "tessera ingest"
    if others:  # an option this does not know: the command is said as it is
        raise ValueError(f"no Python words for {others}")
    settings = {key: value for key, value in (("dense", False if args.no_dense else None),
                                              ("bm25", False if args.no_bm25 else None),
                                              ("dense_type", args.dense_type)) if value is not None}
    options = {"spec": json.loads(args.spec) if args.spec else None, "shard_size": args.shard_size,
               "settings": settings or None, "chunk": False if args.no_chunk else None,
               "replace": True if args.replace else None}
    said = "".join(f", {key}={value!r}" for key, value in options.items() if value is not None)
    return f"flows.api.ingest({args.source!r}, {args.index!r}{said})"


def with_resume(err: TesseraError, *, python: bool = False) -> TesseraError:
    """``err`` with the command that resumes the interrupted first ingestion it is about (an
    ``UnfinishedFirstIngestError``, itself or in its chain) added to its message; any other error as it is.
    ``python``: the caller is Python (``flows.api``), told the ``flows.api.ingest`` call instead."""
    first = in_chain(err, UnfinishedFirstIngestError)
    if first is None:
        return err
    try:
        command = resume_command(first)
    except (LookupError, TypeError, ValueError, AttributeError, OSError):  # a state.json damaged otherwise than the
        return err  # store reads it: the message it has (the command that started the run resumes it) stays true
    if python:
        with contextlib.suppress(ValueError):
            command = python_call(command)
    err.message += f": {command}" if first is err else f" (it resumes with: {command})"
    return err


def resume_in_python(err: TesseraError) -> TesseraError:
    """``err`` (a refusal of ``flows.ingestion.ingest`` that names the ``tessera ingest`` resuming the source, its
    ``resume``) naming the ``flows.api.ingest`` call instead, for a Python caller; any other error as it is."""
    command = getattr(err, "resume", None)
    if command:
        with contextlib.suppress(ValueError):
            err.message = err.message.replace(command, python_call(command))
    return err
