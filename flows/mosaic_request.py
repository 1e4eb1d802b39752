"""mosaicRAG's request format read as a flow: numbered steps (``"1": {"id": ..., "parameters": ...}``) become a
linear flow spec, with the request's ``query`` (``flows.spec.from_mosaic``). Used by ``Flow.load``, ``tessera run``
and the service's task routes, so a mosaicRAG client's body runs as it is."""

from __future__ import annotations

import json
import math
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from operators.errors import SpecError, UnknownOperatorError
from operators.json_tree import json_kind
from operators.params import takes_text
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
        raise SpecError(f"a mosaicRAG request is a JSON object of numbered steps, got {json_kind(body)}",
                        field="body")
    unknown = [k for k in body if not _step_number(k) and k not in ("query", "parameters", "name")]
    if unknown:
        raise SpecError(f"unknown field(s) {_as_json(unknown)} in a mosaicRAG request", field=unknown[0])
    numbers = sorted((k for k in body if _step_number(k)), key=int)
    if [int(k) for k in numbers] != list(range(1, len(numbers) + 1)):
        raise SpecError(f"steps must be numbered 1..n without gaps, got {_as_json(numbers)}", field="steps")
    top_params = {} if body.get("parameters") is None else body["parameters"]
    if not isinstance(top_params, dict):
        raise SpecError(f"must be an object of parameter names and values, got {json_kind(top_params)}",
                        field="parameters")
    steps: dict[str, dict[str, Any]] = {}
    for k in numbers:
        raw = body[k]
        if not isinstance(raw, dict):  # "1": "bm25" is no step without an 'id' but one that is not an object
            raise SpecError(f"a step must be an object with the operator's 'id' and its 'parameters', not "
                            f"{json_kind(raw)}", step=str(k), field=str(k))
        if "id" not in raw:
            raise SpecError("each step needs an 'id' (the operator)", step=str(k), field=f"{k}.id")
        extra = set(raw) - {"id", "parameters"}
        if extra:
            raise SpecError(f"unknown field(s) {_as_json(sorted(extra))}", step=str(k),
                            field=f"{k}.{sorted(extra)[0]}")
        params = raw.get("parameters")
        if params is None:
            params = {}
        if not isinstance(params, dict):  # "k=5", ["k"], [["k", "5"]]: dict() would take the last, or fail
            raise SpecError(f"must be an object of parameter names and values, got {json_kind(params)}",
                            step=str(k), field=f"{k}.parameters")
        params = dict(params)
        if k == numbers[0]:
            params = {**top_params, **params}
        if not isinstance(raw["id"], str):  # str() made null the operator 'None', and 5 the operator '5'
            raise SpecError(f"must be an operator's name or alias (GET /pipeline/info lists them), got "
                            f"{json_kind(raw['id'])}", step=str(k), field=f"{k}.id")
        try:
            cls = get_operator(raw["id"], step=str(k))
        except UnknownOperatorError as err:  # named as the request wrote it, as the checks above name theirs
            err.field = f"{k}.id"
            raise
        steps[str(k)] = {"op": cls.name, "params": _mosaic_values(params, getattr(cls, "Params", None))}
    if not steps:
        raise SpecError("a mosaicRAG request needs at least step '1'", field="1")
    query = body.get("query")
    if isinstance(query, float) and not math.isfinite(query):  # Python's JSON reads NaN: searched for as "nan"
        raise SpecError(f"must be the query text, got {query}, a number JSON does not carry", field="query")
    if not _text_or_none(query):
        # str() would run a list's or an object's Python repr as the query ("['a', 'b']")
        raise SpecError(f"must be the query text, got {json_kind(query)}", field="query")
    given = body.get("name")
    if not _text_or_none(given):
        # str() named the flow by a list's or a bool's Python repr ("['a']", "True"), in its cache entries too
        raise SpecError(f"must be the flow's name as text, got {json_kind(given)}", field="name")
    return {"name": str(given or name), "steps": steps}, (None if query is None else str(query))


def _text_or_none(value: Any) -> bool:
    """Whether a request's ``query`` or ``name`` may be read as text: absent, a text or a number, not a list, an
    object or a bool, which ``str()`` would give as their Python repr."""
    return value is None or isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _as_json(value: Any) -> str:
    """A request's names or values as the client wrote them (JSON), not as Python's repr (``['1', '3']``)."""
    return json.dumps(value, ensure_ascii=False)


def _mosaic_values(params: dict[str, Any], model: Any = None) -> dict[str, Any]:
    """Values as mosaicRAG's UI sends them, every one a string, read back as ``/pipeline/info`` wrote them
    (``flows.info.mosaic_parameter``): 'Yes'/'No' are booleans, '' a param whose default is None left to that
    default, and a list or an object as JSON text (``'["rephrase"]'``) parsed for a param that takes no text. A
    request that sent back the advertised defaults was refused (``filter: ''``, ``strategies: '["rephrase"]'``).
    A number's text with ``_`` (``"1_0"``) is left to the params' check, which refuses it in every spec
    (``operators.params.underscored_number``)."""
    fields = getattr(model, "model_fields", {})
    mapped = {"yes": True, "no": False}
    values: dict[str, Any] = {}
    for name, value in params.items():
        field = fields.get(name)
        if isinstance(value, str) and field is not None:
            if value == "" and field.default is None and not field.is_required():
                continue
            if value[:1] in "[{" and not takes_text(field.annotation):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass  # not JSON: the param's own check names it
        if isinstance(value, str) and value.lower() in mapped and (field is None or _takes_bool(field.annotation)):
            value = mapped[value.lower()]  # a number's 'Yes' stays 'Yes': its error quotes what was sent
        values[name] = value
    return values


def _takes_bool(annotation: Any) -> bool:
    """Whether a param of this type may hold true/false (then mosaicRAG's 'Yes'/'No' are read as those)."""
    if annotation is bool or annotation is Any:
        return True
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _takes_bool(args[0])
    return origin in (Union, UnionType) and any(_takes_bool(arg) for arg in args)
