"""What a spec that pydantic refused is told: one ``SpecError`` naming the step and the field.

Why apart from ``flows.spec``: pydantic's messages are written for Python (``Input should be a valid
string``); a spec's author wrote YAML, where ``no`` is a boolean and a training recipe looks like a flow.
The hints here say what was meant, and ``FlowSpec.build()`` adds the same YAML hint to a step's params.
"""

from __future__ import annotations

import re

from typing import Any, Collection, Iterator

from pydantic import BaseModel, ValidationError

from operators.base import Operator
from operators.errors import (ParamsError, SpecError, TesseraError, UnknownOperatorError, plain_message, short_repr,
                             shown_value, unknown_name_hint, user_loc, value_problem)
from operators.json_tree import spec_kind
from operators.registry import get_operator


def spec_error(err: ValidationError, models: tuple[type[BaseModel], ...] = (), data: Any = None) -> SpecError:
    """Pydantic's first complaint about a spec as a ``SpecError`` naming the step and the field. An unknown field
    comes first, with the close names of its neighbours: a misspelt required field (``placement: {deploymnet:
    ...}``) is also a missing one, and the name written is what the author must fix. ``models``: the spec's, a
    step's and a placement's pydantic models (``flows.spec`` passes them: it imports this module). Of several, the
    first in the file (``data``'s order): ``index_settings`` written above a bad step was said after it, in the
    order of the spec's model."""
    errors = err.errors()
    first = min(errors, key=lambda error: _place_in(data, error)) if isinstance(data, dict) else \
        next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(part) for part in first["loc"]]
    if isinstance(setting := (first.get("ctx") or {}).get("error"), SettingProblem) and setting.key is not None:
        loc.append(setting.key)  # index_settings.KEY, as a param's field is named
    elif first["type"] != "extra_forbidden":
        loc = [str(part) for part in user_loc(first, errors)]  # no union's branch (``name.str``)
    field, message = ".".join(loc) or None, _said(first, loc, errors)
    if first["type"] == "extra_forbidden" and (known := _fields_at(loc[:-1], models)):
        message += unknown_name_hint(loc[-1], known, "fields")
    step = loc[1] if len(loc) > 1 and loc[0] == "steps" else None
    if first["type"] == "string_type" and isinstance(first.get("input"), bool):
        message = yaml_bool_hint(message)
    if first["type"] == "model_type" and step is not None and loc[2:] in ([], ["placement"]):
        # pydantic's "a valid dictionary or instance of StepSpec" names a Python class, not what the YAML lacks
        message = _not_a_mapping(loc, first.get("input"))
    if step is not None:  # a step's fields written at the steps' level
        message += _dedented_hint(data, step, _fields_at(["steps", step], models))
    if first["type"] == "dict_type" and loc in (["steps"], ["steps", step, "params"], ["index_settings"]):
        what = {"steps": "the steps are a mapping of step ids to steps (bm25: {op: retrieve.bm25})",
                "params": "params are a mapping of parameter names to values (params: {k: 10})",
                "index_settings": "index_settings are a mapping of setting names to values (index_settings: "
                                  "{encoder: NAME})"}[loc[-1]]
        message = f"{what}, got {_given(first.get('input'))}"
    if first["type"] == "extra_forbidden" and loc in (["query"], ["parameters"]):
        message += (f"; '{loc[0]}' is a field of a mosaicRAG request, whose steps are numbered (\"1\": {{\"id\": "
                    "OPERATOR, \"parameters\": {...}}, \"2\": ...): this one has no step")
    if first["type"] == "extra_forbidden" and len(loc) == 3 and step is not None:
        message += misplaced_param_hint(data, step, loc[2])
        if loc[2] in _STEP_WORDS:  # another framework's word for a step field: too far for a close-name hint
            message += f"; a step's {_STEP_WORDS[loc[2]]}"
    number = first.get("input")
    if first["type"] == "string_type" and _holds(loc) == "a step id" and isinstance(number, (int, float)) \
            and not isinstance(number, bool):
        written = f"output: '{number}'" if loc == ["output"] else f"inputs: ['{number}']"
        message += f": quote a step id that is a number ({written})"
    if first["type"] == "list_type" and loc[-1:] == ["inputs"] and isinstance(first.get("input"), str):
        message += f": write inputs: [{first['input']}]"
    if first["type"] == "missing" and (what := _MISSING.get(loc[0] if len(loc) == 1 else ".".join(loc[2:]))):
        message += f": {what}"
    if first["type"] == "extra_forbidden" and len(loc) == 1 and _aliased(data, loc[0]):
        message += (f"; '{loc[0]}' holds a YAML anchor the steps use: a spec has no other keys, even for that, so set "
                    "the anchor (&name) where the value is first used in the steps")
    if first["type"] == "extra_forbidden" and loc == ["training"]:  # flows/train/recipes/*.yaml
        message = ("a training recipe, not a flow to run: train with it by tessera train --spec RECIPE_FILE (or "
                   "python -m flows.train --spec RECIPE_FILE)")
    return SpecError(message, step=step, field=field)


#: Other frameworks' words for a step's fields (Haystack's type and init_parameters, mosaicRAG's id and parameters,
#: a task runner's depends_on), and how the step writes each.
_STEP_WORDS = {**dict.fromkeys(("operator", "operation", "type", "id", "component"),
                               "operator is op: {op: retrieve.bm25}"),
               **dict.fromkeys(("parameters", "init_parameters", "args", "config", "options"),
                               "params are params: {params: {k: 10}}"),
               **dict.fromkeys(("input", "depends_on", "after", "upstream"),
                               "inputs are inputs, a list of step ids: {inputs: [bm25, dense]}")}

#: What a field left out holds, said after pydantic's "Field required": a spec with no ``steps`` (``name:`` alone,
#: ``{}``), a step with no ``op``, a placement with no ``deployment``.
_MISSING = {"steps": "a flow's steps, by id (steps: {bm25: {op: retrieve.bm25}})",
            "op": "the operator the step runs (op: retrieve.bm25; tessera ops lists them)",
            "placement.deployment": "the Serve deployment of the step's model (placement: {deployment: NAME})"}


def _aliased(data: Any, key: str) -> bool:
    """Whether ``data[key]`` holds a mapping or a list that the rest of ``data`` holds too: a YAML alias (``*name``)
    of an anchor set under ``key`` is the same object (``defaults: &d {k: 5}``, then ``params: *d``)."""
    def containers(value: Any) -> Iterator[int]:
        if isinstance(value, (dict, list)):
            yield id(value)
            for child in value.values() if isinstance(value, dict) else value:
                yield from containers(child)
    if not isinstance(data, dict) or key not in data:
        return False
    elsewhere = {i for other, value in data.items() if other != key for i in containers(value)}
    return any(i in elsewhere for i in containers(data[key]))


def _place_in(data: dict, error: dict) -> tuple[int, ...]:
    """Where ``error`` is in the spec as written: the position of each key (or list item) of its ``loc`` in its
    mapping, in the file's order. A key left out (``missing``) comes after the ones written, so an unknown key, often
    a misspelt one, is named before the required key it leaves missing; a union's branch (``str``) is no place."""
    place, value = [], data
    for part in error["loc"]:
        if isinstance(value, dict):
            keys = list(value)
            if part not in value:
                return (*place, len(keys))
            place.append(keys.index(part))
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            place.append(part)
            value = value[part]
    return tuple(place)


class SettingProblem(ValueError):
    """An index setting or a step id refused when a spec is loaded (``flows.spec_checks.check_index_settings``,
    ``check_step_ids``), with its key: the error names the field ``index_settings.KEY`` or ``steps.ID`` (and, from a
    file, its line), as a param's names the param."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def _said(error: dict, loc: list[str], errors: list[dict]) -> str:
    """An error's message in a spec author's words: "unknown field", a check's own words, or what the value must
    be and the value given (``value_problem``, as a param's error says it)."""
    if error["type"] in ("extra_forbidden", "value_error", "missing"):
        return plain_message(error)
    holds = _holds(loc)
    if holds and error["type"] in ("string_type", "list_type"):
        return f"must be {holds} (got {shown_value(error.get('input'))})"
    return value_problem(error, errors)


def _holds(loc: list[str]) -> str | None:
    """What a field that names an operator or steps holds, where pydantic's kind ("a valid string") says too little:
    ``op``, ``inputs`` (and each of its items), ``output``."""
    if loc == ["output"] or len(loc) == 4 and loc[0] == "steps" and loc[2] == "inputs":
        return "a step id"
    if len(loc) == 3 and loc[0] == "steps":
        return {"op": "an operator's name (tessera ops lists them)", "inputs": "a list of step ids"}.get(loc[2])
    return None


def _not_a_mapping(loc: list[str], value: Any) -> str:
    """A step (or a placement) that is not a mapping, said in a spec's words, with what to write for a step given as
    its operator's name alone (``bm25: retrieve.bm25``)."""
    what = "a step is a mapping with its op (and params, inputs, ...)" if len(loc) == 2 else \
        "a placement is a mapping ({deployment: NAME, app: tessera})"
    hint = f": write {{op: {value}}}" if len(loc) == 2 and isinstance(value, str) else ""
    if hint and re.fullmatch(r"[A-Za-z_]+:\S.*", value):  # op:bm25 is one text to YAML, not a key and its value
        hint = f": put a space after the colon ({value.replace(':', ': ', 1)})"
    return f"{what}, got {_given(value)}{hint}"


def _dedented_hint(data: Any, step: str, fields: list[str]) -> str:
    """A step's ``fields`` written one level up, at the steps' level (an indentation slip): YAML reads each as a step
    of its own (``params:``, a step named params) and leaves the step above them empty. Said at either."""
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, dict) or step not in steps:
        return ""
    if step in fields and not (isinstance(steps[step], dict) and "op" in steps[step]):  # a step may be named cache
        return (f"; '{step}' is a field of a step, not a step id: indent it below its step, as far as the step's "
                "other fields")
    ids = list(steps)
    after = ids[ids.index(step) + 1] if ids.index(step) + 1 < len(ids) else None
    if steps[step] is None and after in fields:
        return (f"; the line after it, '{after}:', is a field of a step written as a step: indent the step's fields "
                "below it")
    return ""


def _given(value: Any) -> str:
    """A value given where a mapping goes, as a spec's author wrote it: its kind in a spec's words (``spec_kind``:
    a list, not JSON's "an array") and itself, or nothing."""
    return "nothing (null)" if value is None else f"{spec_kind(value)} {short_repr(value)}"


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
    if "must be a string" in message and re.search(r"\(got (true|false)\)", message):
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


def step_field_hint(err: ParamsError, op: str, step_fields: Collection[str]) -> str:
    """An unknown parameter that is a field of the step (``inputs``, ``cache``, ``num_gpus``, ...: ``step_fields``),
    written inside ``params`` instead of beside it: say where it goes, or the flow's author looks for it among the
    parameters."""
    name = (err.field or "").removeprefix("params.")
    if not err.message.startswith("unknown parameter") or name not in step_fields or name == "params":
        return ""
    return f"; '{name}' is a field of the step, not a parameter of {op}: write it beside params, not inside it"


def operator_class(step_id: str, op: str) -> type[Operator]:
    """The operator class a step names; an unknown one's error names the field's whole path, as a param's does
    (``steps.<id>.op``: which step's)."""
    try:
        return get_operator(op, step=step_id)
    except UnknownOperatorError as err:
        err.field = f"steps.{step_id}.op"
        raise
