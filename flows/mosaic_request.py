"""mosaicRAG's request format read as a flow: numbered steps (``"1": {"id": ..., "parameters": ...}``) become a
linear flow spec, with the request's ``query`` (``flows.spec.from_mosaic``). Used by ``Flow.load``, ``tessera run``
and the service's task routes, so a mosaicRAG client's body runs as it is."""

from __future__ import annotations

from typing import Any

from operators.errors import SpecError, UnknownOperatorError
from operators.registry import get_operator


def _step_number(key: Any) -> bool:
    """A mosaicRAG step key: up to 9 ASCII digits (``str.isdigit`` also takes '¹' and '٣', and ``int`` refuses
    those and numbers of more than 4,300 digits)."""
    text = str(key)
    return text.isascii() and text.isdigit() and len(text) <= 9


def is_mosaic_request(data: dict[str, Any]) -> bool:
    return "steps" not in data and any(_step_number(k) for k in data)


def mosaic_spec(body: dict[str, Any], *, name: str = "mosaic") -> tuple[dict[str, Any], str | None]:
    """Read a mosaicRAG task body as a linear flow: the spec as a mapping (``FlowSpec.parse`` validates it) and the
    query.

    Top-level ``parameters`` go to the first step (the data source), under its own.
    """
    if not isinstance(body, dict):  # a list or a string: no field of it to name, but what it is
        raise SpecError(f"a mosaicRAG request is a JSON object of numbered steps, got {type(body).__name__}",
                        field="body")
    unknown = [k for k in body if not _step_number(k) and k not in ("query", "parameters", "name")]
    if unknown:
        raise SpecError(f"unknown field(s) {unknown} in a mosaicRAG request", field=unknown[0])
    numbers = sorted((k for k in body if _step_number(k)), key=int)
    if [int(k) for k in numbers] != list(range(1, len(numbers) + 1)):
        raise SpecError(f"steps must be numbered 1..n without gaps, got {numbers}", field="steps")
    top_params = {} if body.get("parameters") is None else body["parameters"]
    if not isinstance(top_params, dict):
        raise SpecError(f"must be an object of parameter names and values, got {type(top_params).__name__}",
                        field="parameters")
    steps: dict[str, dict[str, Any]] = {}
    for k in numbers:
        raw = body[k]
        if not isinstance(raw, dict) or "id" not in raw:
            raise SpecError("each step needs an 'id' (the operator)", step=str(k), field=f"{k}.id")
        extra = set(raw) - {"id", "parameters"}
        if extra:
            raise SpecError(f"unknown field(s) {sorted(extra)}", step=str(k), field=f"{k}.{sorted(extra)[0]}")
        params = raw.get("parameters")
        if params is None:
            params = {}
        if not isinstance(params, dict):  # "k=5", ["k"], [["k", "5"]]: dict() would take the last, or fail
            raise SpecError(f"must be an object of parameter names and values, got {type(params).__name__}",
                            step=str(k), field=f"{k}.parameters")
        params = dict(params)
        if k == numbers[0]:
            params = {**top_params, **params}
        try:
            op = get_operator(str(raw["id"]), step=str(k)).name
        except UnknownOperatorError as err:  # named as the request wrote it, as the checks above name theirs
            err.field = f"{k}.id"
            raise
        steps[str(k)] = {"op": op, "params": _mosaic_values(params)}
    if not steps:
        raise SpecError("a mosaicRAG request needs at least step '1'", field="1")
    query = body.get("query")
    if query is not None and not isinstance(query, (str, int, float)) or isinstance(query, bool):
        # str() would run a list's or an object's Python repr as the query ("['a', 'b']")
        raise SpecError(f"must be the query text, got {type(query).__name__}", field="query")
    return {"name": str(body.get("name") or name), "steps": steps}, (None if query is None else str(query))


def _mosaic_values(params: dict[str, Any]) -> dict[str, Any]:
    """mosaicRAG's UI sends booleans as 'Yes'/'No' strings."""
    mapped = {"yes": True, "no": False}
    return {k: mapped.get(v.lower(), v) if isinstance(v, str) else v for k, v in params.items()}
