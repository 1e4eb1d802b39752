"""Relative paths of a step's params made absolute where the flow is run, before the step goes to Ray's workers.

A Ray worker's working directory is the folder its cluster was started in (``ray start``), not the shell that runs
the flow, so a relative ``index`` (``.tessera/indices/sample``) or corpus file meant another folder's there: on a
cluster started elsewhere the Ray executor searched another index than the local executor, without a word. The
driver resolves them as the local executor would: an index path as ``resolve_index`` does, a local file or folder
param (``local_files.local_path``) when it is there from the driver's working directory (an operator that looks
further, in the repository say, still does so on the worker). Index names, absolute paths and the params'
keywords stay as they are; so do the params of operators a step runs inside itself.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from operators.local_files import local_path_params


def absolute_paths(op_class: type, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` (a step's, dumped) with its relative index path and its relative local paths that are there from
    this process's working directory made absolute; the same dict when there are none."""
    from operators.store.layout import is_index_name, resolve_index

    fields = op_class.Params.model_fields
    changed: dict[str, Any] = {}
    index = params.get("index")
    if "index" in fields and isinstance(index, str) and index.strip() and not is_index_name(index):
        changed["index"] = str(resolve_index(index))
    for name, keywords in local_path_params(op_class.Params).items():
        value = params.get(name)
        if isinstance(value, str) and value not in keywords and _here(value):
            changed[name] = os.path.abspath(os.path.expanduser(value))
    return {**params, **changed} if changed else params


def _here(value: str) -> bool:
    """Whether a relative path (or glob) names something from this working directory."""
    path = os.path.expanduser(value)
    if not path.strip() or os.path.isabs(path) or "://" in path:
        return False
    return os.path.exists(path) or glob.has_magic(path) and bool(glob.glob(path, recursive=True))
