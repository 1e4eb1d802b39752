"""What a spec that pydantic refused is told: one ``SpecError`` naming the step and the field.

Why apart from ``flows.spec``: pydantic's messages are written for Python (``Input should be a valid
string``); a spec's author wrote YAML, where ``no`` is a boolean and a training recipe looks like a flow.
The hints here say what was meant, and ``FlowSpec.build()`` adds the same YAML hint to a step's params.
"""

from __future__ import annotations

import re

from typing import Any

from pydantic import BaseModel, ValidationError

from operators.errors import SpecError, TesseraError, plain_message, short_repr, unknown_name_hint
from operators.json_tree import json_kind
from operators.registry import get_operator


def spec_error(err: ValidationError, models: tuple[type[BaseModel], ...] = (), data: Any = None) -> SpecError:
    """Pydantic's first complaint about a spec as a ``SpecError`` naming the step and the field. An unknown field
    comes first, with the close names of its neighbours: a misspelt required field (``placement: {deploymnet:
    ...}``) is also a missing one, and the name written is what the author must fix. ``models``: the spec's, a
    step's and a placement's pydantic models (``flows.spec`` passes them: it imports this module)."""
    errors = err.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(part) for part in first["loc"]]
    field, message = ".".join(loc) or None, plain_message(first)
    if first["type"] == "extra_forbidden" and (known := _fields_at(loc[:-1], models)):
        message += unknown_name_hint(loc[-1], known, "fields")
    step = loc[1] if len(loc) > 1 and loc[0] == "steps" else None
    if first["type"] == "string_type" and isinstance(first.get("input"), bool):
        message = yaml_bool_hint(f"{message} (got {first['input']})")
    if first["type"] == "model_type" and step is not None and loc[2:] in ([], ["placement"]):
        # pydantic's "a valid dictionary or instance of StepSpec" names a Python class, not what the YAML lacks
        message = _not_a_mapping(loc, first.get("input"))
    if first["type"] == "dict_type" and loc in (["steps"], ["steps", step, "params"]):
        what = "the steps are a mapping of step ids to steps (bm25: {op: retrieve.bm25})" if loc == ["steps"] else \
            "params are a mapping of parameter names to values (params: {k: 10})"
        message = f"{what}, got {_given(first.get('input'))}"
    if first["type"] == "extra_forbidden" and loc in (["query"], ["parameters"]):
        message += (f"; '{loc[0]}' is a field of a mosaicRAG request, whose steps are numbered (\"1\": {{\"id\": "
                    "OPERATOR, \"parameters\": {...}}, \"2\": ...): this one has no step")
    if first["type"] == "extra_forbidden" and len(loc) == 3 and step is not None:
        message += misplaced_param_hint(data, step, loc[2])
    if first["type"] == "string_type" and loc[:1] == ["steps"] and loc[2:3] == ["inputs"] \
            and isinstance(first.get("input"), (int, float)) and not isinstance(first.get("input"), bool):
        message += (f" (got the number {first['input']}): quote a step id that is a number "
                    f"(inputs: ['{first['input']}'])")
    if first["type"] == "list_type" and loc[-1:] == ["inputs"] and isinstance(first.get("input"), str):
        message += f" of step ids (got '{first['input']}'): write inputs: [{first['input']}]"
    if first["type"] == "extra_forbidden" and loc == ["training"]:  # flows/train/recipes/*.yaml
        message = "a training recipe, not a flow to run: train with it by tessera train --spec (python -m flows.train)"
    return SpecError(message, step=step, field=field)


def _not_a_mapping(loc: list[str], value: Any) -> str:
    """A step (or a placement) that is not a mapping, said in a spec's words, with what to write for a step given as
    its operator's name alone (``bm25: retrieve.bm25``)."""
    what = "a step is a mapping with its op (and params, inputs, ...)" if len(loc) == 2 else \
        "a placement is a mapping ({deployment: NAME, app: tessera})"
    hint = f": write {{op: {value}}}" if len(loc) == 2 and isinstance(value, str) else ""
    return f"{what}, got {_given(value)}{hint}"


def _given(value: Any) -> str:
    """A value given where a mapping goes, as a spec's author wrote it: its JSON kind and itself, or nothing."""
    return "nothing (null)" if value is None else f"{json_kind(value)} {short_repr(value)}"


def misplaced_param_hint(data: Any, step: str, name: str) -> str:
    """An unknown field of a step that is a parameter of its operator: written beside ``params`` instead of in it
    (YAML's indentation: ``params:`` left empty and ``k: 5`` below it at the step's level)."""
    try:
        op = data["steps"][step]["op"]
        params = get_operator(op, step=step).Params.model_fields
    except (KeyError, TypeError, TesseraError):  # no op, or an unknown one: its own error comes later
        return ""
    if name not in params:
        return ""
    return (f"; '{name}' is a parameter of {op}: put it under the step's params (params: {{{name}: ...}}; in "
            f"block YAML, indented below params:)")


def yaml_bool_hint(message: str) -> str:
    """A string expected and a bool found: YAML 1.1 reads no/yes/on/off (any case) as booleans, so say so."""
    if "valid string" in message and re.search(r"\b(True|False|true|false)\b", message):
        return (f"{message}; YAML reads unquoted no, yes, on, off, true and false as booleans: quote the "
                "value ('no') to mean the text")
    return message


def _fields_at(parent: list[str], models: tuple[type[BaseModel], ...]) -> list[str]:
    """The fields a spec may hold at ``parent``: the spec's (``models[0]``), a step's (``models[1]``) or a
    placement's (``models[2]``); none elsewhere."""
    in_step = parent[:1] == ["steps"]
    where = {0: 0, 2: 1 if in_step else None, 3: 2 if in_step and parent[2:] == ["placement"] else None}
    index = where.get(len(parent))
    return sorted(models[index].model_fields) if index is not None and index < len(models) else []
