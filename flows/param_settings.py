"""A step's params changed for one run (``tessera run FLOW --set dense.k=50``, ``Flow.load(..., params=)``), so that
trying another ``k`` or model does not take a spec file of one's own.

A setting is ``STEP.PARAM=VALUE``: STEP a step id of the flow (ids may hold dots: the longest id that the text
begins with is the step), PARAM a param of its operator, or a dotted path into a param that is a mapping
(``fused.weights.dense=2``), and VALUE read as YAML (``20`` a number, ``true`` a flag, ``[a, b]``
a list, ``null`` the operator's default). The flow is validated as a spec file would be: a misspelt param is
refused by the step's own checks, naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from operators.errors import SpecError, close_names, did_you_mean

if TYPE_CHECKING:
    from flows.spec import FlowSpec


def parsed_setting(text: str, field: str = "set") -> tuple[str, Any]:
    """``("dense.k", 50)`` from ``"dense.k=50"``: the dotted name and the YAML value."""
    import yaml

    from operators.yaml_text import DaysAsWritten

    name, equals, value = text.partition("=")
    name = name.strip()
    if not equals or "." not in name.strip("."):
        raise SpecError(f"'{text}': write a setting STEP.PARAM=VALUE (dense.k=50): a step of the flow, one of its "
                        "params and the value", field=field)
    if not value.strip():
        raise SpecError(f"'{text}': give a value after '=' (null leaves the param to its default)", field=field)
    try:
        return name, yaml.load(value, Loader=DaysAsWritten)  # 2024-02-30: its text
    except yaml.YAMLError as err:
        raise SpecError(f"'{text}': the value is not YAML ({getattr(err, 'problem', None) or err}); quote it for "
                        "the shell and for YAML: 'step.param=\"a: b\"'", field=field) from None


def with_settings(spec: "FlowSpec", settings: Mapping[str, Any] | Iterable[str], *,
                  field: str = "params") -> "FlowSpec":
    """A copy of ``spec`` with each setting's param set: ``{"dense.k": 50}``, or texts ``"dense.k=50"``; ``field``
    names where the settings came from in an error (``set``: the command line's ``--set``)."""
    if isinstance(settings, Mapping):
        pairs = [(_name(name, field), value) for name, value in settings.items()]
    else:
        pairs = [parsed_setting(text, field) for text in settings]
    steps = dict(spec.steps)
    for name, value in pairs:
        step_id, path = _step_and_path(name, steps, spec.name, field)
        params = _set(dict(steps[step_id].params), path, value, f"{name}: ", field)
        steps[step_id] = steps[step_id].model_copy(update={"params": params})
    return spec.model_copy(update={"steps": steps})


def _name(name: Any, field: str) -> str:
    if not isinstance(name, str) or "." not in name.strip("."):
        raise SpecError(f"a setting is named STEP.PARAM ('dense.k'); got {name!r}", field=field)
    return name


def _step_and_path(name: str, steps: Mapping[str, Any], flow: str, field: str) -> tuple[str, list[str]]:
    """The step a dotted name begins with (the longest step id that it begins with) and the param path after it."""
    for cut in sorted((i for i, c in enumerate(name) if c == "."), reverse=True):
        if name[:cut] in steps and name[cut + 1:]:
            return name[:cut], name[cut + 1:].split(".")
    step = name.split(".", 1)[0]
    hint = did_you_mean(close_names(step, steps))
    raise SpecError(f"'{name}': flow '{flow}' has no step '{step}'{f' ({hint})' if hint else ''}; its steps: "
                    f"{', '.join(steps)}", field=field)


def _set(params: dict[str, Any], path: list[str], value: Any, where: str, field: str) -> dict[str, Any]:
    """``params`` with ``value`` at ``path``; a mapping on the way is copied, not changed in place."""
    head, *rest = path
    if not rest:
        params[head] = value
        return params
    inner = params.get(head)
    if inner is not None and not isinstance(inner, Mapping):
        raise SpecError(f"{where}param '{head}' is {inner!r}, not a mapping: set it whole", field=field)
    params[head] = _set(dict(inner or {}), rest, value, where, field)
    return params
