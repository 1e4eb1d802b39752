"""Params that name files or folders on the machine that runs the step.

A flow written by the person who runs it may read whatever that person can; a flow that
arrives over the network (the service's task and search bodies) must not read the server's
files. Such params say so with ``json_schema_extra=local_path()``, so that the service can
confine them (``serve/index_roots.py``) without knowing each operator. Index params are
confined on their own (an index is named, not only pathed).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

#: The JSON-schema key that marks a local path param (it shows in ``tessera ops --format json``).
MARKER = "local_path"


def local_path(*keywords: str) -> dict[str, Any]:
    """``json_schema_extra`` of a param naming a local file or folder; ``keywords`` are values that are not paths
    (``token_store: auto``)."""
    return {MARKER: True, "path_keywords": list(keywords)}


def local_path_params(params: type[BaseModel]) -> dict[str, set[str]]:
    """The local path params of a Params class, each with its non-path keywords."""
    found = {}
    for name, field in params.model_fields.items():
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get(MARKER):
            found[name] = set(extra.get("path_keywords") or ())
    return found
