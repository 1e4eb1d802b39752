"""Which indices and files a request may name: indices under the index roots, files under the data roots.

An ``index`` comes from the network (a body's ``index``, a step's ``params.index``, a
``retrieve.multi_collection`` collection's ``index``), and an index is a folder the
retrievers open and read, so without a bound any client could point a flow at any
directory the service can read. A name or path is resolved the way the retrievers
resolve it (``operators.store.resolve_index``), then made absolute with ``..`` and
symlinks followed; it must lie inside one of the roots (``args.service.index_roots``;
by default the default index's parent and ``$TESSERA_HOME/indices``). Anything else is
a 422 naming the field. The spec that runs carries the resolved path, so what was
checked is what is opened.

Params that name other local files (a source's ``path``, ``retrieve.corpus_bm25``'s
``corpus``, a vector store folder, ``sources.sql``'s ``sqlite:///`` file: each marked
``local_path()`` in its Params, ``operators/local_files.py``) would let a client read the
server's files back as rows. They must lie under the data roots (``args.service.data_roots``;
by default the bundled sample's ``data/`` folder), relative paths checked where the operators
look for them (the app's working directory, then the repository); a URL of any other
scheme is refused. So must those of the steps a step runs inside itself
(``retrieve.multi_collection``'s ``postprocess``: ``Operator.nested_operators``).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path, PurePath
from typing import Any, Iterator

from flows.spec import FlowSpec
from flows.specfile import MAX_DEPTH, nesting_depth
from flows.sqlite_urls import sqlite_file, with_query
from operators.errors import one_line
from operators.local_files import local_path_params
from operators.sources.paths import glob_stem
from operators.registry import get_operator
from serve.http.errors import ApiError
from serve.runs.param_numbers import check_numbers

#: The repository's bundled data (data/sample): the default data root, and where operators look second.
REPO = Path(__file__).resolve().parents[2]
#: The longest file name (bytes) and path the file systems the service runs on take (Linux: 255 and 4096); a longer
#: index name is refused naming its field, not an ``OSError`` when the index is looked for.
NAME_MAX, PATH_MAX = 255, 4096


def default_roots(default_index: str | None, home: Path) -> list[str]:
    """The roots when the config names none: the default index's parent and ``$TESSERA_HOME/indices``."""
    roots = [home / "indices"]
    if default_index:
        roots.insert(0, Path(default_index).parent)
    return [str(root.resolve()) for root in roots]


def confine(index: str, roots: list[str], field: str) -> str:
    """``index`` as the absolute, symlink-free path it names, if that lies under one of ``roots``; else a 422."""
    from operators.store import resolve_index

    if "\x00" in index:
        raise ApiError(422, f"{field}: an index name cannot hold a NUL character", param=field,
                       code="index_not_allowed")
    longest = max((len(part.encode("utf-8", "surrogatepass")) for part in PurePath(index).parts), default=0)
    if longest > NAME_MAX:
        raise ApiError(422, f"{field}: index '{one_line(index, 60)}' has a name (or path part) of {longest} bytes; "
                       f"at most {NAME_MAX}", param=field, code="index_name_too_long")
    try:
        path = Path(resolve_index(index)).resolve()
        if len(os.fsencode(path)) >= PATH_MAX:
            raise OSError(errno.ENAMETOOLONG, "File name too long")
    except (OSError, UnicodeError, RuntimeError) as err:  # a path too long, one it cannot encode, a symlink loop
        too_long = getattr(err, "errno", None) == errno.ENAMETOOLONG
        raise ApiError(422, f"{field}: index '{one_line(index, 60)}' cannot be opened here "
                       f"({getattr(err, 'strerror', None) or err})", param=field,
                       code="index_name_too_long" if too_long else "index_not_allowed") from None
    if not under(path, roots):
        raise ApiError(422, f"{field}: index '{index}' is outside the folders this service reads indices from "
                       "(args.service.index_roots); name an index under one of them", param=field,
                       code="index_not_allowed")
    return str(path)


#: How deep a step's params may nest (dicts and lists): a spec file's limit, far past any operator's need and far
#: below the interpreter's recursion limit, which the walks here would otherwise reach (a 500, not a 422).
MAX_PARAMS_DEPTH = MAX_DEPTH


def check_depth(params: Any, field: str) -> None:
    """A 422 naming ``field`` when ``params`` nests deeper than ``MAX_PARAMS_DEPTH`` (measured without recursion)."""
    if nesting_depth(params) <= MAX_PARAMS_DEPTH:
        return
    raise ApiError(422, f"{field}: nested more than {MAX_PARAMS_DEPTH} levels deep; a step's params nest "
                   f"{MAX_PARAMS_DEPTH} levels at most", param=field, code="params_too_deep")


def default_data_roots() -> list[str]:
    """The data roots when the config names none: the repository's ``data/`` (the bundled sample) in a checkout;
    none in an installed package, which has no sample: there the folder beside the packages, ``site-packages/data``,
    is another package's (``contractions`` installs one)."""
    return [str((REPO / "data").resolve())] if (REPO / "data" / "sample").is_dir() else []


def confine_spec(spec: FlowSpec, roots: list[str], data_roots: list[str]) -> FlowSpec:
    """``spec`` with every index its steps name confined to ``roots`` (any ``index`` string in their params), and
    every local file they name checked against ``data_roots``."""
    steps = {}
    for step_id, step in spec.steps.items():
        check_depth(step.params, f"steps.{step_id}.params")
        check_numbers(step.params, f"steps.{step_id}.params")
        params = _confined(step.params, roots, f"steps.{step_id}.params")
        params = _check_local_files(step.op, params, data_roots, f"steps.{step_id}.params")
        _check_nested_files(step.op, params, step_id, data_roots)
        steps[step_id] = step if params == step.params else step.model_copy(update={"params": params})
    return spec.model_copy(update={"steps": steps})


def _check_local_files(op: str, params: dict[str, Any], data_roots: list[str], field: str) -> dict[str, Any]:
    """``params`` with each local file param, the default of one left unset too, checked and given as the place it
    was checked at: a relative path was checked where it exists (the working directory, else the repository), and
    opened by a source in the working directory only; a default was not checked at all."""
    fields, checked = get_operator(op).Params.model_fields, dict(params)
    for name, keywords in local_path_params(get_operator(op).Params).items():
        value = params.get(name, fields[name].default)
        if isinstance(value, str) and value not in keywords:
            checked[name] = check_local_file(value, data_roots, f"{field}.{name}")
    return checked


def _check_nested_files(op: str, params: dict[str, Any], step_id: str, data_roots: list[str]) -> None:
    """The local files of the steps that step ``step_id`` runs inside itself (``retrieve.multi_collection``'s
    ``postprocess``: ``Operator.nested_operators``), checked as a step's, the field named in full
    (``steps.m.params.postprocess.0.params.token_store``): only the outer step's params were, so a nested step
    read files from anywhere. Only an operator that runs others is built here (a ``ParamsError`` is the spec's 422,
    as when the flow builds)."""
    from operators.base import Operator

    cls = get_operator(op)
    if cls.nested_operators is Operator.nested_operators:
        return
    step = cls(params, step_id=step_id)
    for where, nested in step.walk(f"steps.{step_id}"):
        if nested is step:  # the outer step's own params: _check_local_files
            continue
        for name, keywords in local_path_params(type(nested.params)).items():
            value = getattr(nested.params, name, None)
            if isinstance(value, str) and value not in keywords:
                check_local_file(value, data_roots, f"{where}.params.{name}")


def check_local_file(value: str, data_roots: list[str], field: str) -> str:
    """``value`` as the absolute place it is opened from, or a 422 unless that lies under ``data_roots``: a relative
    path the first of the working directory and the repository where it exists (``retrieve.corpus_bm25``'s order), or
    both when neither has it. The glob part of a pattern (``docs/*.jsonl``) may not climb out with ``..``."""
    database = sqlite_file(value) if value.startswith("sqlite:") else None  # the file as SQLAlchemy opens it:
    path = value if database is None else database  # %2F decoded ('..%2F..%2Fetc' opened /etc, checked as a name)
    if "://" in path or path.startswith("sqlite:") or "\x00" in path:
        raise _not_allowed(value, field, "a URL of this kind is not read by this service")
    stem, rest = glob_stem(path)
    if ".." in rest:
        raise _not_allowed(value, field, "a pattern may not climb out of its folder with '..'")
    places = [stem] if stem.is_absolute() else [Path.cwd() / stem, REPO / stem]
    places = [place for place in places if place.exists()][:1] or places  # the one the operator opens
    for place in places:
        if not under(place.resolve(), data_roots):
            raise _not_allowed(value, field, "it is outside the folders this service reads files from "
                               "(args.service.data_roots)")
    if stem.is_absolute():
        return value
    absolute = places[0].joinpath(*rest)
    return str(absolute) if database is None else with_query(value, absolute)


def under(path: Path, roots: list[str]) -> bool:
    """Whether ``path`` (absolute, symlinks resolved) is one of ``roots`` or lies inside one."""
    return any(path.is_relative_to(root) for root in roots)


def _not_allowed(value: str, field: str, why: str) -> ApiError:
    return ApiError(422, f"{field}: '{value}' cannot be read: {why}", param=field, code="path_not_allowed")


def _confined(value: Any, roots: list[str], field: str) -> Any:
    if isinstance(value, dict):
        return {key: confine(item, roots, f"{field}.{key}") if key == "index" and isinstance(item, str)
                else _confined(item, roots, f"{field}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_confined(item, roots, f"{field}.{i}") for i, item in enumerate(value)]
    return value


def index_params(spec: FlowSpec) -> Iterator[tuple[str, str, str]]:
    """``(step id, field, value)`` of every ``index`` string in ``spec``'s step params (where ``confine_spec``
    looks), the field as ``params.index`` or deeper (``params.collections.0.index``)."""
    def walk(value: Any, field: str) -> Iterator[tuple[str, str]]:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "index" and isinstance(item, str):
                    yield f"{field}.{key}", item
                else:
                    yield from walk(item, f"{field}.{key}")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, f"{field}.{i}")

    for step_id, step in spec.steps.items():
        for field, value in walk(step.params, "params"):
            yield step_id, field, value
