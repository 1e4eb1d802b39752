"""Params that name files, folders or environment variables of the machine that runs the step, a language
model, or a regular expression.

A flow written by the person who runs it may read whatever that person can; a flow that
arrives over the network (the service's task and search bodies) must not read the server's
files or secrets. Such params say so with ``json_schema_extra=local_path()`` (or ``env_var()``,
``llm_model()``, ``secret()``, ``sent_headers()``, ``regex()``), so that the service can confine them
(``serve/indices/index_roots.py``, ``serve/security/spec_guard.py``) without knowing each operator. Index params are
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


def env_var() -> dict[str, Any]:
    """``json_schema_extra`` of a param naming an environment variable whose value the step sends somewhere (a
    key)."""
    return {"env_var": True}


def secret(env_param: str) -> dict[str, Any]:
    """``json_schema_extra`` of a param holding a secret itself (a key), which ``env_param`` names the environment
    variable of instead: a spec from the network may not hold one (a saved flow or a task would keep it in clear)."""
    return {"secret": True, "env_param": env_param}


def sent_headers(env_param: str) -> dict[str, Any]:
    """``json_schema_extra`` of a param holding HTTP headers the step sends (``{name: value}``): a spec from the
    network may not put a credential in one (``serve/security/spec_guard.py``'s ``CREDENTIAL_HEADERS``), as it may not
    hold a ``secret()``; ``env_param`` names the environment variable of the key the step sends instead."""
    return {"sent_headers": True, "env_param": env_param}


def regex() -> dict[str, Any]:
    """``json_schema_extra`` of a param holding a regular expression the step runs over texts: Python's ``re`` has no
    timeout and holds the GIL while it backtracks, so a pattern from the network (``(\\w+\\s?)+$``) could stop every
    request of the process; the service runs such a param at its default only."""
    return {"regex": True}


def llm_model() -> dict[str, Any]:
    """``json_schema_extra`` of a param naming a language model (an alias or a litellm model string)."""
    return {"llm_model": True}


def marked_params(params: type[BaseModel], marker: str) -> list[str]:
    """The params of a Params class marked with ``marker`` (``"env_var"``, ``"llm_model"``)."""
    return [name for name, field in params.model_fields.items()
            if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get(marker)]


def local_path_params(params: type[BaseModel]) -> dict[str, set[str]]:
    """The local path params of a Params class, each with its non-path keywords."""
    found = {}
    for name, field in params.model_fields.items():
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get(MARKER):
            found[name] = set(extra.get("path_keywords") or ())
    return found
