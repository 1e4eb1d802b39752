"""Saved flows: validated specs stored by name under ``$TESSERA_HOME/flows/NAME.yaml``.

``TESSERA_HOME`` defaults to ``~/.tessera`` and is read on every call, so a test or a
job can point it elsewhere. A flow is saved only after ``FlowSpec.build()`` accepted
it (operators, params, inputs), so a saved flow is always runnable with the
operators it was saved against. ``FlowSpec.load`` (and so every executor, the CLI
and the API) resolves a saved flow by name, after file paths and built-in specs;
names of built-in specs cannot be reused, so a name always means one flow.
"""

from __future__ import annotations

import re
from pathlib import Path

from operators.atomic import write_text
from operators.errors import SpecError
from operators.home import tessera_home  # noqa: F401 - callers use flows.store.tessera_home

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def flows_dir() -> Path:
    return tessera_home() / "flows"


def default_cache_dir() -> Path:
    return tessera_home() / "cache"


def builtin_dir() -> Path:
    from flows.spec import SPECS_DIR

    return SPECS_DIR


def builtin_names() -> list[str]:
    return sorted({p.stem for suffix in ("yaml", "yml", "json") for p in builtin_dir().glob(f"*.{suffix}")})


def saved_names() -> list[str]:
    folder = flows_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name or ""):
        raise SpecError(f"'{name}' is not a valid flow name (letters, digits, '_', '.', '-'; "
                        "starting with a letter or digit)", field="name")
    return name


def saved_path(name: str) -> Path | None:
    """The saved flow's file, or None when there is no saved flow by that name."""
    if not NAME_PATTERN.match(str(name)):
        return None
    path = flows_dir() / f"{name}.yaml"
    return path if path.is_file() else None


def save(name: str, source: str | Path) -> Path:
    """Validate a spec (path, name or YAML/JSON text) and store it as ``NAME``.

    The stored spec's ``name`` is set to ``NAME``, so its cache entries and
    ``tessera cache explain NAME`` line up with the name it is run by.
    """
    from flows.spec import FlowSpec

    check_name(name)
    if name in builtin_names():
        raise SpecError(f"'{name}' is a built-in flow; save under another name", field="name")
    spec = FlowSpec.load(source)
    spec = spec.model_copy(update={"name": name})
    spec.build()  # operators, params, inputs, cycles: nothing invalid is saved
    folder = flows_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return write_text(folder / f"{name}.yaml", spec.to_yaml())


def delete(name: str) -> Path:
    path = saved_path(name)
    if path is None:
        if name in builtin_names():
            raise SpecError(f"'{name}' is a built-in flow and cannot be deleted", field="name")
        raise SpecError(f"no saved flow named '{name}' (saved flows: {', '.join(saved_names()) or 'none'})",
                        field="name")
    path.unlink()
    return path
