"""Operator discovery: the built-in operators and those of other packages (plugins).

Built-ins: a new operator is one new file under ``operators/<category>/``. Every module in a
category package is imported once and every ``Operator`` subclass with a ``name`` defined in it
is registered under that name; a category's ``base.py`` (its abstract contract, a class without
a name) registers nothing. Modules whose optional dependencies are missing are skipped with a
note (``tessera ops`` shows it).

Plugins: operators in the user's own package, loaded with the built-ins the first time the
registry is listed or looked up:

* the entry points of the group ``tessera.operators`` (in the package's pyproject.toml,
  ``[project.entry-points."tessera.operators"]``), each naming a module (``mylab = "mylab.operators"``)
  or one operator class (``keyword_flag = "mylab.operators:KeywordFlagger"``);
* ``TESSERA_OPERATORS``, a comma-separated list of importable module names, for a notebook or a
  script without packaging (read again at each lookup: a module added later is loaded then).

A plugin module registers every ``Operator`` subclass with a ``name`` defined in it or in its
submodules; a plugin class sets its own ``name``, ``category.snake_name`` (``mylab.keyword_flag``).
A plugin is never skipped: one that fails to import, names no operator, or whose operator has no
valid name or takes another's name or alias (a built-in's) raises ``OperatorPluginError``, one
line naming the entry point or module (and both operators).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import threading
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from operators.base import Operator
from operators.errors import TesseraError, UnknownOperatorError

# The operators package, scanned by path: importing it from here would make a circle, since its
# __init__ re-exports the registry.
_PACKAGE = Path(__file__).resolve().parent
# Packages under operators/ that hold shared building blocks, not operators.
_NOT_CATEGORIES = {"testing", "models", "store", "llm"}
#: The entry-point group that other packages register their operators under.
ENTRY_POINT_GROUP = "tessera.operators"
#: The environment variable naming plugin modules (comma-separated).
ENV_VAR = "TESSERA_OPERATORS"
_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")

_lock = threading.Lock()
_registry: dict[str, type[Operator]] = {}
_origins: dict[str, str] = {}  # operator name -> where it came from ("built-in", "entry point ...")
_skipped: dict[str, str] = {}
_loaded = False
_env_modules: set[str] = set()  # TESSERA_OPERATORS modules already registered


class OperatorPluginError(TesseraError):
    """An operator plugin (entry point or ``TESSERA_OPERATORS`` module) cannot be registered."""


def _discover() -> None:
    global _loaded
    wanted = _env_module_names()
    if _loaded and wanted <= _env_modules:
        return
    with _lock:
        if not _loaded:
            found: dict[str, tuple[type[Operator], str]] = {}
            _discover_builtins(found)
            for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
                _add_entry_point(found, ep)
            _commit(found)
            _loaded = True
        new = sorted(_env_module_names() - _env_modules)
        if new:
            found = {name: (cls, _origins.get(name, "registered by hand")) for name, cls in _registry.items()}
            for module_name in new:
                origin = f"{ENV_VAR} module '{module_name}'"
                _add_plugin_module(found, _import_plugin(module_name, origin), origin)
            _commit(found)
            _env_modules.update(new)


def _env_module_names() -> set[str]:
    return {part.strip() for part in os.environ.get(ENV_VAR, "").split(",") if part.strip()}


def _commit(found: dict[str, tuple[type[Operator], str]]) -> None:
    """Register everything found at once: a failed discovery leaves the registry as it was."""
    _check_aliases(found)
    for name, (cls, origin) in found.items():
        _registry[name] = cls
        _origins[name] = origin


def _discover_builtins(found: dict[str, tuple[type[Operator], str]]) -> None:
    for pkg in pkgutil.iter_modules([str(_PACKAGE)]):
        if not pkg.ispkg or pkg.name.startswith("_") or pkg.name in _NOT_CATEGORIES:
            continue
        package = importlib.import_module(f"operators.{pkg.name}")
        for mod in pkgutil.iter_modules(package.__path__):
            if mod.name.startswith("_"):
                continue
            module_name = f"operators.{pkg.name}.{mod.name}"
            try:
                module = importlib.import_module(module_name)
            except ImportError as err:  # an optional dependency is missing
                _skipped[module_name] = str(err)
                continue
            for value in vars(module).values():
                if _is_operator(value) and value.__module__ == module_name and value.name:
                    other = found.get(value.name)
                    if other is not None and other[0] is not value:
                        raise RuntimeError(
                            f"[Internal] operator name '{value.name}' is used by both "
                            f"{_qualname(other[0])} and {_qualname(value)}"
                        )
                    found[value.name] = (value, "built-in")


def _add_entry_point(found: dict[str, tuple[type[Operator], str]], ep: metadata.EntryPoint) -> None:
    dist = getattr(ep, "dist", None)
    origin = f"entry point '{ep.name} = {ep.value}' ({ENTRY_POINT_GROUP}" + (
        f", distribution {dist.name})" if dist is not None else ")")
    try:
        target = ep.load()
    except Exception as err:  # noqa: BLE001 - whatever the plugin raises, name the plugin
        raise OperatorPluginError(f"operator plugin {origin} failed to import: {_one_line(err)}") from err
    if isinstance(target, ModuleType):
        _add_plugin_module(found, target, origin)
    elif _is_operator(target):
        _add_plugin_class(found, target, origin)
    else:
        raise OperatorPluginError(f"operator plugin {origin} names {_describe(target)}, "
                                  "not a module or an Operator subclass")


def _import_plugin(module_name: str, origin: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - whatever the plugin raises, name the plugin
        raise OperatorPluginError(f"operator plugin {origin} failed to import: {_one_line(err)}") from err


def _add_plugin_module(found: dict[str, tuple[type[Operator], str]], module: ModuleType, origin: str) -> None:
    prefix = module.__name__ + "."
    classes = {id(v): v for v in vars(module).values() if _is_operator(v) and v.name
               and (v.__module__ == module.__name__ or v.__module__.startswith(prefix))}
    if not classes:
        raise OperatorPluginError(f"operator plugin {origin}: module '{module.__name__}' defines no Operator "
                                  "subclass with a name")
    for cls in classes.values():
        _add_plugin_class(found, cls, origin)


def _add_plugin_class(found: dict[str, tuple[type[Operator], str]], cls: type[Operator], origin: str) -> None:
    where = f"operator plugin {origin}: {_qualname(cls)}"
    if not cls.name:
        raise OperatorPluginError(f"{where} has no name: set the class attribute name = 'category.snake_name'")
    if not _NAME.fullmatch(cls.name):
        raise OperatorPluginError(f"{where}: name '{cls.name}' is not 'category.snake_name' "
                                  "(lower case, digits and _, parts joined by '.')")
    other = found.get(cls.name)
    if other is not None and other[0] is not cls:
        inherited = "" if "name" in vars(cls) else " (it inherits the name: give it its own)"
        raise OperatorPluginError(f"operator name '{cls.name}' is used by both {_qualname(other[0])} "
                                  f"({other[1]}) and {_qualname(cls)} ({origin}){inherited}")
    found[cls.name] = (cls, origin)


def _check_aliases(found: dict[str, tuple[type[Operator], str]]) -> None:
    """An alias of a plugin operator that is another operator's name or alias would hide it."""
    owners: dict[str, tuple[type[Operator], str]] = {}
    for name, (cls, origin) in found.items():
        for alias in cls.aliases:
            other = found.get(alias) or owners.get(alias)
            if other is not None and other[0] is not cls and (origin, other[1]) != ("built-in", "built-in"):
                raise OperatorPluginError(f"operator alias '{alias}' of {_qualname(cls)} ({origin}) is also "
                                          f"the name or an alias of {_qualname(other[0])} ({other[1]})")
            owners[alias] = (cls, origin)


def _is_operator(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Operator)


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _describe(value: Any) -> str:
    return f"{_qualname(value)} (a class)" if isinstance(value, type) else f"a {type(value).__name__}"


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def all_operators() -> dict[str, type[Operator]]:
    """Every registered operator (built-in and plugins), by name, sorted."""
    _discover()
    return dict(sorted(_registry.items()))


def skipped_modules() -> dict[str, str]:
    """Built-in operator modules that could not be imported, with the reason."""
    _discover()
    return dict(_skipped)


def get_operator(name: str, *, step: str | None = None) -> type[Operator]:
    """The operator class registered as ``name``; the error lists close matches."""
    ops = all_operators()
    if name in ops:
        return ops[name]
    for cls in ops.values():
        if name in cls.aliases:
            return cls
    import difflib

    close = difflib.get_close_matches(name, ops, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known operators: {', '.join(ops)}"
    raise UnknownOperatorError(f"unknown operator '{name}'{hint}", step=step, field="op")


def create(name: str, params: dict[str, Any] | None = None, *, step_id: str | None = None,
           input_steps: tuple[str, ...] = ()) -> Operator:
    """Construct (cheaply: params only) the operator registered as ``name``."""
    return get_operator(name, step=step_id)(params, step_id=step_id, input_steps=input_steps)
