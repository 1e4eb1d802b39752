"""Whether this service can run a flow, and why not: the one rule behind ``GET /flows``'s ``status`` (the web UI's
Search tab) and ``GET /v1/models``'s answering flows (chat).

The rule is the check every request's flow passes before it runs (``Service.checked_flow``, its steps placed on
this app's deployments): a param left unset (``rag_gold``'s dataset, which ``tessera bench`` fills in), a model
that is neither served here nor on this machine, an environment variable not set, a step the spec guard refuses.
It is checked without an index, since a request may name any: the index's own checks come with the request. Then
what a request checks of the caller and of the moment: another key's unshared index, a step placed on a deployment
Serve gave up on (``DEPLOY_FAILED``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from operators.errors import SpecError, TesseraError
from serve import service as svc
from serve.http.errors import ApiError, spec_refusal
from serve.runs.flow_request import refuse_missing_files
from serve.indices.index_roots import confine_spec
from serve.runs.placed_status import placed_steps, refuse_failed
from serve.http.server_paths import without_server_paths
from serve.runs.step_bounds import check_step_count
from serve.runs.flow_resolution import FlowFile, load_spec, refuse_missing_indices


def flow_problem(name: str, tenant: str, now: tuple[Any, ...]) -> str | None:
    """Why this service would refuse flow ``name`` for a query, in the words of that refusal; None when it runs it.
    ``now``: ``versions()``, read once by a caller that asks of many flows."""
    service = svc.current()
    try:
        file = service.flow_file(name, tenant)
        if file is None:
            service.resolve_flow(name, tenant)  # raises: no flow of that name
    except TesseraError as err:
        return refusal(err)
    return (file_problem(service, file, now) or _missing_file_problem(service, file, now)
            or _index_problem(service, file, tenant) or _failed_placement_problem(service, file, now))


def _missing_file_problem(service: svc.Service, file: FlowFile, now: tuple[Any, ...]) -> str | None:
    """A local file the flow reads that is not there now (a 422 when it runs): a stat per file, asked every time,
    since the file comes and goes without the flow's spec changing (apart from ``file_problem``'s cache)."""
    built = _built(service, file, now)
    try:
        if built is not None:
            refuse_missing_files(built)
    except ApiError as err:
        return str(err)
    return None


def _index_problem(service: svc.Service, file: FlowFile, tenant: str) -> str | None:
    """Another key's unshared index that the flow names (a 403 when it runs), or one that is not there now (a 422;
    a flow saved before its index was made), in the order a run refuses them (``runnable_spec``): per caller and
    per sharing, a stat per index, so apart from ``file_problem``'s cache; no task store query for a flow that
    names none of the service's indices."""
    try:
        spec = confine_spec(load_spec(file), service.index_roots, service.data_roots)
        service.indices.refuse_unshared(spec, tenant, None)
        refuse_missing_indices(spec)
    except (TesseraError, ApiError) as err:
        return refusal(err)
    return None


def _failed_placement_problem(service: svc.Service, file: FlowFile, now: tuple[Any, ...]) -> str | None:
    """A step placed on a deployment Serve gave up on (a 503 ``deployment_failed`` when it runs): Serve's word of
    now (``placed_status``, read at most every 2 s), so apart from ``file_problem``'s cache."""
    try:
        refuse_failed(_placed_steps(service, file, now))
    except ApiError as err:
        return str(err)
    return None


@functools.lru_cache(maxsize=1024)
def _built(service: svc.Service, file: FlowFile, now: tuple[Any, ...]) -> Any:
    """The flow built with its steps placed as a run places them (about 10 ms for the 29 built-in flows), once for
    both readers below; None for a flow that does not build (its check fails before either matters)."""
    try:
        spec = load_spec(file)
        check_step_count(spec, service.limits)  # a CLI-saved flow of 9,000 steps made GET /flows build it for minutes
        return service.place(spec).build()
    except (TesseraError, ApiError):
        return None


def _placed_steps(service: svc.Service, file: FlowFile, now: tuple[Any, ...]) -> tuple[tuple[str, Any], ...]:
    """The flow's steps placed on deployments."""
    built = _built(service, file, now)
    return placed_steps(built) if built is not None else ()


def file_problem(service: svc.Service, file: FlowFile, now: tuple[Any, ...]) -> str | None:
    """``flow_problem`` for one version of a flow's file and of what the check reads besides it (``now``,
    ``versions()``, and the paths the flow's steps name their models by: a checkpoint folder in a subfolder of the
    model repository, whose own version does not change then, can be made or deleted while the app serves):
    building, placing and checking the 29 built-in flows took about 250 ms a call, kept here at a few stats."""
    return _checked(service, file, now, tuple(_version(path) for path in _model_paths(service, file, now)))


@functools.lru_cache(maxsize=1024)
def _checked(service: svc.Service, file: FlowFile, now: tuple[Any, ...], paths: tuple[Any, ...]) -> str | None:
    """``file_problem`` for one version of its inputs (``paths``: the versions of the flow's model paths)."""
    try:
        spec = load_spec(file)
        check_step_count(spec, service.limits)  # as a request's flow is counted, before it is built
        spec.build()  # as a search builds the flow it named: a step's error names the file and line (a placed copy's
        # build has no file to name, and an unknown operator met while placing had no step)
        confined = confine_spec(spec, service.index_roots, service.data_roots)  # as a run is
        service.checked_flow(service.place(confined), ["a query"])
    except ApiError as err:  # an Ollama server down is the moment's, not the flow's: kept here, it went stale when
        return None if err.code == "model_unreachable" else str(err)  # the server came up (a request's 503 says it)
    except TesseraError as err:
        return refusal(err)
    return None


def refusal(err: TesseraError | ApiError) -> str:
    """``err`` in the words of the request's refusal (``serve.http.errors``' handlers): a spec error's field by the
    request's path, and no path of the server. A saved flow's file that does not read (not YAML, not UTF-8, no
    mapping) was named by its whole path under ``$TESSERA_HOME``, where its search's 422 names ``broken.yaml``."""
    if isinstance(err, SpecError):
        return spec_refusal(err)
    return str(err) if isinstance(err, ApiError) else without_server_paths(str(err))


def _model_paths(service: svc.Service, file: FlowFile, now: tuple[Any, ...]) -> tuple[Path, ...]:
    """Every model reference of the flow's steps read as a path, which ``resolve_model_path`` tries first whatever
    the reference looks like (a step placed on a deployment loads no model here)."""
    from flows.model_check import flow_needs

    built = _built(service, file, now)
    if built is None:
        return ()
    references = sorted({need.reference for need in flow_needs(built)})
    return tuple(Path(os.path.expanduser(reference)) for reference in references)


def versions() -> tuple[Any, ...]:
    """The version of what a flow's check reads besides its file and the app's fixed deployments: each models file
    (the packaged one, the user's: ``$TESSERA_MODELS`` or ``$TESSERA_HOME/models.yaml`` can be edited while the app
    serves) and the model repository's folder (a model trained meanwhile), by path, mtime, size and inode."""
    from operators.llm.aliases import PACKAGED_FILE, user_file
    from operators.models.references import models_dir

    return tuple(_version(path) for path in (PACKAGED_FILE, user_file(), models_dir()))


def _version(path: Path | None) -> tuple[Any, ...]:
    """A path's version: its mtime, size and inode, None when it does not exist (a folder's mtime changes as files
    are made in it or deleted)."""
    try:
        stat = path.stat() if path is not None else None
    except OSError:
        stat = None
    return (str(path), *((stat.st_mtime_ns, stat.st_size, stat.st_ino) if stat is not None else (None,)))
