"""Validating an operator's params: the refusals pydantic alone would not make.

Why its own module: ``Operator.validate_params`` is the one door every spec, API call and plugin
goes through, and three of its rules are not pydantic's default. Pydantic reads ``true`` as 1 for a
number field (a YAML typo, not a choice), it ignores unknown keys unless a model sets ``extra``
(a misspelt param would silently do nothing), and it takes NaN and infinity for a float (YAML's ``.nan``
and ``.inf``, Python's JSON's ``NaN``: a fusion weight of NaN ranked the documents it weighed last, and
``--json`` wrote ``NaN``, which JSON has not). All are refused here, naming the field. A request to the service
(JSON) also takes no number's text written with ``_`` (``"1_0"``, which pydantic reads as 10).
"""

from __future__ import annotations

import json
import math
import types
import typing
from types import UnionType
from typing import Annotated, Any, Literal, Mapping, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from operators.errors import NonFiniteNumberError, ParamsError, short_repr, unknown_name_hint
from operators.json_tree import first_place


def validate(model: type[BaseModel], params: BaseModel | Mapping[str, Any] | None, *, op: str,
             step: str | None) -> BaseModel:
    """``params`` as a ``model`` instance; a ``ParamsError`` names the operator ``op``, the step and the field."""
    if isinstance(params, model):
        return params
    if isinstance(params, BaseModel):
        params = params.model_dump()
    if params is not None and not isinstance(params, Mapping):  # a list, a text: dict()'s bare TypeError before
        raise ParamsError(f"params are a mapping of param names to values, got {type(params).__name__} "
                          f"{short_repr(params)}", op=op, step=step, field="params")
    params = dict(params or {})
    if found := bool_for_number(model, params):  # pydantic reads `true` as 1: a typo, not a choice
        raise ParamsError(found[1], op=op, step=step, field=f"params.{found[0]}")
    if found := underscored_number(model, params):  # "1_0" read as 10: the same refusal for a spec and a request
        raise ParamsError(found[1], op=op, step=step, field=f"params.{found[0]}")
    if unknown := unknown_params(model, params):  # a Params that leaves `extra` unset ignores them: refused here
        raise ParamsError("unknown parameter" + unknown_name_hint(unknown[0], model.model_fields, "parameters"),
                          op=op, step=step, field=f"params.{unknown[0]}")
    # before validation too: an integer param given NaN or an infinity was pydantic's "Input should be a finite
    # number", not this error (which the service answers as ``number_out_of_range``)
    _refuse_not_finite(params, op=op, step=step)
    try:
        validated = model.model_validate(params)
    except ValidationError as err:
        raise ParamsError.from_validation(err, op=op, step=step, known=model.model_fields) from None
    # as validated: pydantic reads the text "nan" as a float too (the mosaicRAG task API sends numbers as text)
    _refuse_not_finite(validated.model_dump(include=validated.model_fields_set), op=op, step=step)
    for name in validated.model_fields_set:  # a column named "" (output_column: ""): written, read, never found
        if name.endswith("_column") and isinstance(getattr(validated, name), str) and \
                not getattr(validated, name).strip():
            raise ParamsError("a column's name, not empty (null, where the param takes it, leaves the column out)",
                              op=op, step=step, field=f"params.{name}")
    return validated


def with_keywords(params: BaseModel | Mapping[str, Any] | None, keywords: Mapping[str, Any], *, op: str,
                  step: str | None) -> BaseModel | Mapping[str, Any] | None:
    """The params of ``Op(k=5)``, its keywords as ``Op({"k": 5})`` takes them (``validate`` then names a misspelt
    one); a dict and keywords both are refused, since which would win is a guess."""
    if not keywords:
        return params
    if params is not None:
        raise ParamsError("give params as a dict or as keywords, not both (got a dict and the keywords "
                          f"{', '.join(keywords)})", op=op, step=step, field="params")
    return dict(keywords)


def _refuse_not_finite(params: Mapping[str, Any], *, op: str, step: str | None) -> None:
    """A ``NonFiniteNumberError`` naming the first NaN or infinity in ``params`` (the service's
    ``number_out_of_range``)."""
    if (place := _not_finite(params)) is not None:
        raise NonFiniteNumberError(f"must be a finite number, not {place[1]}", op=op, step=step,
                                   field=f"params.{place[0]}")


def _not_finite(params: Mapping[str, Any]) -> tuple[str, float] | None:
    """The dotted place and value of the first NaN or infinity in ``params`` (``json_tree.first_place``)."""
    return first_place(params, lambda item: item if isinstance(item, float) and not math.isfinite(item) else None)


def unknown_params(model: type[BaseModel], params: Mapping[str, Any]) -> list[str]:
    """The keys of ``params`` that ``model`` neither declares nor ignores on purpose. Pydantic ignores unknown
    keys unless a model sets ``extra``; a misspelt param must fail in every step, so a plugin's ``Params``
    without ``extra="forbid"`` gets the same refusal (``extra="allow"`` or ``"ignore"`` set on purpose stays)."""
    if model.model_config.get("extra") is not None:
        return []
    fields = model.model_fields
    names = set(fields) | {alias for f in fields.values() for alias in (f.alias, f.validation_alias)
                           if isinstance(alias, str)}
    return [str(key) for key in params if key not in names]


def is_number(annotation: Any) -> bool:
    """Whether a field holds a number and not a bool (``int``, ``float``, optionals and unions of them)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        return is_number(args[0])
    if args and typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        return bool(kinds) and bool not in kinds and all(is_number(a) for a in kinds)
    return annotation in (int, float)


def bool_refusal(annotation: Any, value: Any) -> str | None:
    """The refusal of a boolean given to a number field (pydantic reads ``true`` as 1: YAML's ``batch_size: yes``
    is a typo, not a choice), or None. Operator params, a step's overrides and a training recipe all say it."""
    if isinstance(value, bool) and is_number(annotation):
        return f"must be a number, not {str(value).lower()}"
    return None


def bool_for_number(model: type[BaseModel], data: Any, loc: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """The dotted place of the first number field of ``model`` that raw ``data`` gives a boolean, and its
    ``bool_refusal``, inside the models ``model``'s fields hold too (a list's index named: a filter's
    ``{any: [{field: year, gte: true}]}``)."""
    if not isinstance(data, Mapping):
        return None
    for name, value in data.items():
        field = model.model_fields.get(str(name)) or next(  # or by its alias: a filter's `any`, `in`
            (f for f in model.model_fields.values() if f.alias == name), None)
        if field is None:
            continue
        here = (*loc, str(name))
        if problem := bool_refusal(field.annotation, value):
            return ".".join(here), problem
        if isinstance(value, Mapping) and (values := _dict_values(field.annotation)) is not None:
            for key, item in value.items():  # fuse.weighted's weights: {bm25: true}
                if problem := bool_refusal(values, item):
                    return ".".join((*here, str(key))), problem
        inner = model_in(field.annotation)
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for index, item in items if inner is not None else ():
            if found := bool_for_number(inner, item, here if index is None else (*here, str(index))):
                return found
    return None


def _dict_values(annotation: Any) -> Any:
    """The value type of a ``dict[K, V]`` annotation (or of one inside ``X | None``), else None."""
    if typing.get_origin(annotation) is dict:
        return get_args(annotation)[1]
    return next((values for arg in get_args(annotation) if (values := _dict_values(arg)) is not None), None)


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds: itself, or inside ``X | None`` and ``list[X]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((model for arg in get_args(annotation) if (model := model_in(arg)) is not None), None)


def number_kind(annotation: Any) -> str | None:
    """"a number" or "a whole number" for a param of this type that takes one (then a text of it is read), else
    None (``flows.mosaic_request`` reads its texts by it too)."""
    if annotation in (int, float) or isinstance(annotation, type) and issubclass(annotation, (int, float)) \
            and not issubclass(annotation, bool):
        return "a whole number" if issubclass(annotation, int) else "a number"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return number_kind(args[0])
    kinds = [kind for arg in args for kind in [number_kind(arg)] if kind] if origin in (Union, UnionType) else []
    return "a number" if "a number" in kinds else kinds[0] if kinds else None


def takes_text(annotation: Any) -> bool:
    """Whether a param of this type may hold a string (then a value that looks like JSON stays text)."""
    if annotation is str or isinstance(annotation, type) and issubclass(annotation, str):
        return True
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return any(isinstance(arg, str) for arg in args)
    if origin is Annotated:
        return takes_text(args[0])
    return origin in (Union, UnionType) and any(takes_text(arg) for arg in args)


def underscored_number(model: type[BaseModel], params: Mapping[str, Any]) -> tuple[str, str] | None:
    """The name and refusal of the first param of ``model`` that takes a number and no text and is given a number's
    text with ``_`` (``"1_0"``), which pydantic, as Python's ``int()``, reads as 10: no JSON number is written so."""
    for name, value in params.items():
        field = model.model_fields.get(str(name))
        if isinstance(value, str) and "_" in value and field is not None and not takes_text(field.annotation) \
                and (kind := number_kind(field.annotation)):
            return str(name), f"must be {kind} as JSON writes it, without \"_\" (got {json.dumps(value)})"
    return None
