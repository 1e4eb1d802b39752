"""Reading a spec: the one place where flow specs (and training recipes) are read from YAML or JSON.

A source is a file path, the name of a built-in flow (``flows/specs/NAME.yaml``), the
name of a saved flow (``$TESSERA_HOME/flows/NAME.yaml``), or YAML/JSON text. Names
resolve in that order everywhere a flow is accepted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flows import store
from operators.errors import SpecError


def resolve_spec_path(source: str | Path) -> Path | None:
    """A spec file path, the built-in ``flows/specs/<name>.{yaml,yml,json}``, or the saved flow
    ``$TESSERA_HOME/flows/<name>.yaml``; None if none of them."""
    if "\n" in str(source):
        return None
    try:  # YAML/JSON text on one line can be too long to be a file name
        path = Path(source)
        if path.is_file():
            return path
        builtin = store.builtin_path(str(source))
        if builtin is not None:
            return builtin
    except OSError:
        return None
    return store.saved_path(str(source))


def read_mapping(source: str | Path) -> tuple[dict[str, Any], Path | None]:
    """The mapping a spec source holds, and its file (None for text)."""
    path = resolve_spec_path(source)
    if path is not None:
        return load_yaml(path.read_text(encoding="utf-8"), origin=str(path)), path
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("{")):
        return load_yaml(source), None
    known = ", ".join(store.builtin_names()) or "none"
    saved = ", ".join(store.saved_names()) or "none"
    raise SpecError(f"no flow spec file or built-in flow named '{source}', and no saved flow by that "
                    f"name; built-in flows: {known}; saved flows: {saved}", field="spec")


def load_yaml(text: str, *, origin: str | None = None) -> dict[str, Any]:
    """A spec's YAML or JSON text as a mapping; anything else is a ``SpecError``."""
    where = f"{origin}: " if origin else ""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SpecError(f"{where}not valid YAML/JSON: {err}", field="spec") from None
    if not isinstance(data, dict):
        raise SpecError(f"{where}a flow spec must be a mapping, got {type(data).__name__}", field="spec")
    return data
