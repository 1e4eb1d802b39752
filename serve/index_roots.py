"""Which indices a request may name: only those under the service's index roots.

An ``index`` comes from the network (a body's ``index``, a step's ``params.index``, a
``retrieve.multi_collection`` collection's ``index``), and an index is a folder the
retrievers open and read, so without a bound any client could point a flow at any
directory the service can read. A name or path is resolved the way the retrievers
resolve it (``operators.store.resolve_index``), then made absolute with ``..`` and
symlinks followed; it must lie inside one of the roots (``args.service.index_roots``;
by default the default index's parent and ``$TESSERA_HOME/indices``). Anything else is
a 422 naming the field. The spec that runs carries the resolved path, so what was
checked is what is opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows.spec import FlowSpec
from serve.errors import ApiError


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
    path = Path(resolve_index(index)).resolve()
    if not any(path == Path(root) or path.is_relative_to(root) for root in roots):
        raise ApiError(422, f"{field}: index '{index}' is outside the folders this service reads indices from "
                       "(args.service.index_roots); name an index under one of them", param=field,
                       code="index_not_allowed")
    return str(path)


def confine_spec(spec: FlowSpec, roots: list[str]) -> FlowSpec:
    """``spec`` with every index its steps name confined to ``roots`` (any ``index`` string in their params)."""
    steps = {}
    for step_id, step in spec.steps.items():
        params = _confined(step.params, roots, f"steps.{step_id}.params")
        steps[step_id] = step if params == step.params else step.model_copy(update={"params": params})
    return spec.model_copy(update={"steps": steps})


def _confined(value: Any, roots: list[str], field: str) -> Any:
    if isinstance(value, dict):
        return {key: confine(item, roots, f"{field}.{key}") if key == "index" and isinstance(item, str)
                else _confined(item, roots, f"{field}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_confined(item, roots, f"{field}.{i}") for i, item in enumerate(value)]
    return value
