"""Saved flows: validated specs stored by name under ``$TESSERA_HOME/flows/NAME.yaml``.

``TESSERA_HOME`` defaults to ``~/.tessera`` and is read on every call, so a test or a
job can point it elsewhere. A flow is saved only after ``FlowSpec.build()`` accepted
it (operators, params, inputs), so a saved flow is always runnable with the
operators it was saved against. ``flows.specfile`` (so ``FlowSpec.load``, every executor,
the CLI and the API) resolves a saved flow by name, after file paths and built-in specs;
names of built-in specs cannot be reused, so a name always means one flow.

The service keeps each API key's flows apart: ``owner`` (an API key's id) puts them in
``$TESSERA_HOME/flows/keys/OWNER/``, which name resolution by ``flows.specfile`` never
reads, so one key's flow is neither listed nor runnable by name for another key or the CLI.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from operators.atomic import write_text
from operators.errors import SpecError, TesseraError, close_names, short_repr
from operators.errors import did_you_mean as suggestion
from operators.home import tessera_home

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")
#: The built-in flows, shipped with the package.
BUILTIN_DIR = Path(__file__).resolve().parent / "specs"
#: The built-in training recipes (``flows.train.recipe`` reads them): ``tessera flows list`` lists them, so a flow name
#: that is one is refused as a recipe, not as a name found nowhere.
RECIPES_DIR = Path(__file__).resolve().parent / "train" / "recipes"
#: What a spec file ends with (a built-in is NAME plus one of these).
SPEC_SUFFIXES = (".yaml", ".yml", ".json")


class FlowNotFoundError(SpecError):
    """``delete`` found no saved flow of that name (none was saved, or another caller deleted it first)."""


class FlowStoreError(TesseraError):
    """The flows folder cannot be written (a read-only ``$TESSERA_HOME``, a file where a folder goes): the
    CLI's one line, exit 2; not a ``SpecError``, as the request was fine (the service answers a bare 500)."""


def flows_dir(owner: str | None = None) -> Path:
    """Where saved flows live: the shared folder, or an API key's own (``owner``)."""
    if owner is None:
        return tessera_home() / "flows"
    if not NAME_PATTERN.match(owner):
        raise SpecError(f"'{owner}' is not a valid owner id", field="owner")
    return tessera_home() / "flows" / "keys" / owner


def default_cache_dir() -> Path:
    return tessera_home() / "cache"


def builtin_names() -> list[str]:
    return sorted({p.stem for suffix in SPEC_SUFFIXES for p in BUILTIN_DIR.glob(f"*{suffix}")})


def recipe_names() -> list[str]:
    """The built-in training recipes (``flows/train/recipes/NAME.yaml``)."""
    return sorted(path.stem for path in RECIPES_DIR.glob("*.yaml"))


def builtin_path(name: str) -> Path | None:
    """The built-in flow's file, or None when there is no built-in flow by that name (a name with a path in it,
    such as ``../../serve/config``, names none: it comes from clients of the service too)."""
    if not NAME_PATTERN.match(str(name)):
        return None
    for suffix in SPEC_SUFFIXES:
        path = BUILTIN_DIR / f"{name}{suffix}"
        if path.is_file():
            return path
    return None


def saved_names(owner: str | None = None) -> list[str]:
    folder = flows_dir(owner)
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def did_you_mean(name: str, names: list[str]) -> str:
    """``"; did you mean 'bm25'?"``: the ``names`` closest to a misspelt flow ``name`` (``close_names``, at most three,
    best first), or nothing when none is close; the CLI's and the service's unknown flow say it."""
    hint = suggestion(close_names(name, names))
    return hint and f"; {hint}"


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        given = short_repr(name) if isinstance(name, str) else f"{type(name).__name__} {short_repr(name)}"
        longer = f"; this one has {len(name):,}" if isinstance(name, str) and len(name) > 100 else ""
        raise SpecError(f"{given} is not a valid flow name (letters, digits, '_', '.', '-'; starting with a letter "
                        f"or digit; at most 100 characters{longer})", field="name")
    stem, dot, suffix = name.rpartition(".")
    if dot and suffix.lower() in ("yaml", "yml", "json"):  # a file's name given for the flow's: mine.yaml.yaml
        raise SpecError(f"'{name}' is a file's name, not a flow's: the flow is saved as NAME.yaml and run by NAME; "
                        f"save it as '{stem}'", field="name")
    return name


def saved_path(name: str, owner: str | None = None) -> Path | None:
    """The saved flow's file, or None when there is no saved flow by that name."""
    if not NAME_PATTERN.match(str(name)):
        return None
    path = flows_dir(owner) / f"{name}.yaml"
    return path if path.is_file() else None


def save_kept(name: str, spec: Any, *, force: bool = False) -> tuple[Path, bool]:
    """``save`` for the CLI and Python (a user's own flows): a saved flow of that name with another spec is
    replaced only with ``force`` (it was overwritten without a word), else a ``SpecError`` naming its file; the same
    spec again is saved as it is. Returns the path and whether another spec was replaced. (The service's ``PUT
    /flows/{name}`` replaces, as a PUT does.)"""
    existing = saved_path(name)
    replaced = existing is not None and existing.read_text(encoding="utf-8") != \
        spec.model_copy(update={"name": name}).to_yaml()
    if replaced and not force:
        raise SpecError(f"a saved flow named '{name}' exists ({existing}) with another spec: replace it with "
                        "tessera flows save --force (in Python, save(name, force=True)), or save under another name",
                        field="name")
    return save(name, spec), replaced


def save(name: str, spec: Any, owner: str | None = None) -> Path:
    """Store a ``FlowSpec`` as ``NAME`` once it builds (operators, params, inputs, cycles).

    The stored spec's ``name`` is set to ``NAME``, so its cache entries and
    ``tessera cache explain NAME`` line up with the name it is run by.
    """
    check_name(name)
    if name in builtin_names():
        raise SpecError(f"'{name}' is a built-in flow; save under another name", field="name")
    if owner is None and name in recipe_names():  # listed beside it by `tessera flows list`, and `flows show` and
        # `tessera train --spec` would each take another of the two
        raise SpecError(f"'{name}' is a built-in training recipe; save under another name", field="name")
    spec = spec.model_copy(update={"name": name})
    spec.build()  # nothing invalid is saved
    folder = flows_dir(owner)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return write_text(folder / f"{name}.yaml", spec.to_yaml())
    except OSError as err:  # TESSERA_HOME on a read-only disk, in /proc, a file where the folder goes
        raise FlowStoreError(f"cannot save flow '{name}' in {folder} (TESSERA_HOME={tessera_home()}): "
                             f"{err.strerror or err}", field="TESSERA_HOME") from None


def delete(name: str, owner: str | None = None) -> Path:
    path = saved_path(name, owner)
    if path is None and name in builtin_names():
        raise SpecError(f"'{name}' is a built-in flow and cannot be deleted", field="name")
    try:
        if path is None:
            raise FileNotFoundError(name)
        path.unlink()
    except FileNotFoundError:  # none, or deleted by another caller since it was found
        raise FlowNotFoundError(f"no saved flow named '{name}' (saved flows: "
                                f"{', '.join(saved_names(owner)) or 'none'})", field="name") from None
    return path
