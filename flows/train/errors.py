"""The error of ``tessera train``: one line, naming the bad argument, file or field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from operators.errors import TesseraError, first_validation_problem, shown_value, unknown_name_hint, value_problem
from operators.params import model_in


class TrainError(TesseraError):
    """Training cannot run: a missing qrels split, an evaluation split, an unknown model kind, a bad config."""


def read_recipe(path: Path) -> dict[str, Any]:
    """A recipe file's mapping. Its text's problems are ``--spec``'s, naming the file (and, for a key given twice,
    the key's place and lines): a file that is not UTF-8 text was ``internal error: UnicodeDecodeError``."""
    from flows.specfile import load_yaml, read_text
    from operators.errors import SpecError

    try:
        return load_yaml(read_text(path), origin=str(path))
    except SpecError as err:
        raise TrainError(err.message, field="spec") from None


def section_error(err: ValidationError, path: Path, section: type[BaseModel], name: str) -> TrainError:
    """Pydantic's first complaint about a recipe's ``name`` section (``section``, its model), naming the file and the
    field, in a recipe author's words: an unknown field with the close names and every field it may be (a
    ``learning_rate`` where the recipe says ``lr`` was "unknown field" alone), and an item that is no mapping (a
    ``datasets`` entry written as a path) without pydantic's Python class ("instance of LabelledSet")."""
    first, inside, message = first_validation_problem(err)
    loc = [str(part) for part in first["loc"]]
    if first["type"] == "extra_forbidden" and (known := _fields_at(section, loc[:-1])):
        message += unknown_name_hint(loc[-1], known, "fields")
    elif first["type"] == "model_type" and (known := _fields_at(section, loc)):
        message = f"must be a mapping of {', '.join(known)}, not {shown_value(first.get('input'))}"
    elif first["type"] not in ("value_error", "missing"):
        from flows.spec_errors import yaml_bool_hint

        message = yaml_bool_hint(value_problem(first, err.errors()))  # "must be a whole number (got 'many')"
    return TrainError(f"{path}: {message}", field=".".join(filter(None, (name, inside))))


def _fields_at(model: type[BaseModel], loc: list[str]) -> list[str]:
    """The fields of the model found at ``loc`` inside ``model`` (a list's index passes through), or none."""
    for part in loc:
        if part.isdigit():
            continue
        field = model.model_fields.get(part)
        inner = model_in(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return sorted(model.model_fields)

