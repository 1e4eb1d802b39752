"""What a spec that pydantic refused is told: one ``SpecError`` naming the step and the field.

Why apart from ``flows.spec``: pydantic's messages are written for Python (``Input should be a valid
string``); a spec's author wrote YAML, where ``no`` is a boolean and a training recipe looks like a flow.
The hints here say what was meant, and ``FlowSpec.build()`` adds the same YAML hint to a step's params.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from operators.errors import SpecError, first_validation_problem


def spec_error(err: ValidationError) -> SpecError:
    """Pydantic's first complaint about a spec as a ``SpecError`` naming the step and the field."""
    first, field, message = first_validation_problem(err)
    loc = [str(part) for part in first["loc"]]
    step = loc[1] if len(loc) > 1 and loc[0] == "steps" else None
    if first["type"] == "string_type" and isinstance(first.get("input"), bool):
        message = yaml_bool_hint(f"{message} (got {first['input']})")
    if first["type"] == "extra_forbidden" and loc == ["training"]:  # flows/train/recipes/*.yaml
        message = "a training recipe, not a flow to run: train with it by tessera train --spec (python -m flows.train)"
    return SpecError(message, step=step, field=field)


def yaml_bool_hint(message: str) -> str:
    """A string expected and a bool found: YAML 1.1 reads no/yes/on/off (any case) as booleans, so say so."""
    if "valid string" in message and re.search(r"\b(True|False)\b", message):
        return (f"{message}; YAML reads unquoted no, yes, on, off, true and false as booleans: quote the "
                "value ('no') to mean the text")
    return message
