"""Operator discovery: the built-in operators and those of other packages (plugins).

Built-ins: a new operator is one new file under ``operators/<category>/``. Every module in a
category package is imported once and every ``Operator`` subclass with a ``name`` defined in it
is registered under that name; a category's ``base.py`` (its abstract contract, a class without
a name) registers nothing. Modules whose optional dependencies are missing are skipped with a
note (``tessera ops`` shows it). Looking up one by its name (``retrieve.bm25``) where no plugin is
installed or named imports its own module alone, ``operators/retrieve/bm25.py``.

Plugins: operators in the user's own package, loaded with the built-ins the first time the
registry is listed or looked up:

* the entry points of the group ``tessera.operators`` (in the package's pyproject.toml,
  ``[project.entry-points."tessera.operators"]``), each naming a module (``mylab = "mylab.operators"``)
  or one operator class (``keyword_flag = "mylab.operators:KeywordFlagger"``);
* ``TESSERA_OPERATORS``, a comma-separated list of importable module names, for a notebook or a
  script without packaging (read again at each lookup: a module added later is loaded then, and the operators of
  one no longer named are unregistered).

A plugin module registers every ``Operator`` subclass with a ``name`` defined in it or in its
submodules; a plugin class sets its own ``name``, ``category.snake_name`` (``mylab.keyword_flag``).
A plugin is never skipped: one that fails to import, names no operator, or whose operator has no
valid name or takes another's name or alias (a built-in's) raises ``OperatorPluginError``, one
line naming the entry point or module (and both operators).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

from operators.base import Operator
from operators.errors import UnknownOperatorError, close_names, did_you_mean, see_docs, short_repr
from operators.imported_code import remember_stamps
from operators.plugins import (ENTRY_POINT_GROUP, ENV_VAR, OperatorPluginError, add_entry_point,
                               add_plugin_class, add_plugin_module, check_aliases, env_module_names, import_plugin,
                               is_operator, qualname)

__all__ = ["ENTRY_POINT_GROUP", "ENV_VAR", "OperatorPluginError", "all_operators", "create", "get_operator",
           "skipped_modules"]

# The operators package, scanned by path: importing it from here would make a circle, since its
# __init__ re-exports the registry.
_PACKAGE = Path(__file__).resolve().parent
# Packages under operators/ that hold shared building blocks, not operators.
_NOT_CATEGORIES = {"testing", "models", "store", "llm"}

_lock = threading.Lock()
_registry: dict[str, type[Operator]] = {}
_origins: dict[str, str] = {}  # operator name -> where it came from ("built-in", "entry point ...")
_skipped: dict[str, str] = {}
_loaded = False
_env_modules: set[str] = set()  # TESSERA_OPERATORS modules already registered


def _discover() -> None:
    global _loaded
    wanted = env_module_names()
    if _loaded and wanted == _env_modules and not _reloaded():
        return
    with _lock:
        if dropped := _env_modules - env_module_names():  # no longer named (a notebook moved its class to another
            _forget_modules(dropped)                        # module): its operators go, or they clashed with theirs
        if not _loaded:
            found: dict[str, tuple[type[Operator], str]] = {}
            _discover_builtins(found)
            for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
                add_entry_point(found, ep)
            _commit(found)
            _loaded = True
        new = sorted(env_module_names() - _env_modules)
        if new:
            found = {name: (cls, _origins.get(name, "registered by hand")) for name, cls in _registry.items()}
            for module_name in new:
                origin = f"{ENV_VAR} module '{module_name}'"
                add_plugin_module(found, import_plugin(module_name, origin), origin)
            _commit(found)
            _env_modules.update(new)
        if reloaded := _reloaded():
            _register_reloaded(reloaded)


def _forget_modules(modules: set[str]) -> None:
    """Unregister the operators of ``TESSERA_OPERATORS`` modules it no longer names."""
    origins = {f"{ENV_VAR} module '{module}'" for module in modules}
    for name in [name for name, origin in _origins.items() if origin in origins]:
        del _registry[name]
        del _origins[name]
    _env_modules.difference_update(modules)


def _reloaded() -> dict[str, type[Operator]]:
    """The plugin operators whose module now holds another class under their class's name, by operator name: the
    module was reloaded (``importlib.reload`` after an edit, in a notebook). The registry kept the old class, so a
    flow built after the reload ran the code from before the edit, while the step cache keyed the new one."""
    found = {}
    for name, cls in _registry.items():
        module = sys.modules.get(cls.__module__)
        if _origins.get(name, "built-in") == "built-in" or module is None or "." in cls.__qualname__:
            continue
        current = vars(module).get(cls.__qualname__)
        if is_operator(current) and current is not cls:
            found[name] = current
    return found


def _register_reloaded(reloaded: dict[str, type[Operator]]) -> None:
    """Put the classes of a reloaded plugin module in place of the old ones, checked as any plugin's (one whose
    ``name`` the edit changed is registered by its new name only), with the operators a reloaded
    ``TESSERA_OPERATORS`` module now defines besides."""
    found = {name: (cls, _origins.get(name, "registered by hand")) for name, cls in _registry.items()
             if name not in reloaded}
    for name, cls in reloaded.items():
        add_plugin_class(found, cls, _origins[name])
    modules = {cls.__module__ for cls in reloaded.values()}
    for module_name in sorted(m for m in _env_modules if any(c == m or c.startswith(m + ".") for c in modules)):
        add_plugin_module(found, sys.modules[module_name], f"{ENV_VAR} module '{module_name}'")
    check_aliases(found)
    for name in set(_registry) - set(found):
        del _registry[name]
        _origins.pop(name, None)
    _commit(found)


def _commit(found: dict[str, tuple[type[Operator], str]]) -> None:
    """Register everything found at once: a failed discovery leaves the registry as it was."""
    check_aliases(found)
    for name, (cls, origin) in found.items():
        _registry[name] = cls
        _origins[name] = origin


def _is_category(name: str) -> bool:
    """Whether the package ``operators/<name>`` holds operators (not shared building blocks, not private)."""
    return not name.startswith("_") and name not in _NOT_CATEGORIES


def _defined_operators(module: Any) -> list[type[Operator]]:
    """The named ``Operator`` subclasses defined in ``module`` (not those it imports)."""
    return [value for value in vars(module).values()
            if is_operator(value) and value.__module__ == module.__name__ and value.name]


def _discover_builtins(found: dict[str, tuple[type[Operator], str]]) -> None:
    for pkg in pkgutil.iter_modules([str(_PACKAGE)]):
        if not pkg.ispkg or not _is_category(pkg.name):
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
            for value in _defined_operators(module):
                other = found.get(value.name)
                if other is not None and other[0] is not value:
                    raise RuntimeError(
                        f"[Internal] operator name '{value.name}' is used by both "
                        f"{qualname(other[0])} and {qualname(value)}"
                    )
                found[value.name] = (value, "built-in")


def all_operators() -> dict[str, type[Operator]]:
    """Every registered operator (built-in and plugins), by name, sorted."""
    _discover()
    return dict(sorted(_registry.items()))


def skipped_modules() -> dict[str, str]:
    """Built-in operator modules that could not be imported, with the reason."""
    _discover()
    return dict(_skipped)


def _plugins_possible() -> bool:
    """Whether a plugin may register operators (a module in ``TESSERA_OPERATORS`` or an installed entry point)."""
    global _no_entry_points
    if env_module_names():
        return True
    if not _no_entry_points:
        _no_entry_points = not metadata.entry_points(group=ENTRY_POINT_GROUP)
    return not _no_entry_points


_no_entry_points = False  # found once: the installed entry points of the group are none


def _builtin_alone(name: str) -> type[Operator] | None:
    """The built-in ``category.name`` from its own module, ``operators/<category>/<name>.py``, importing none of the
    others (every built-in lives in the module its name gives), where nothing else can register operators: a
    command that runs a few operators skips importing the other fifty (about 0.25 s a process). ``None`` where a
    plugin may, or where the name is no built-in's module: the full discovery decides."""
    category, _, stem = name.partition(".")
    if (_loaded or not stem or "." in stem or not _is_category(category) or stem.startswith("_")
            or not (_PACKAGE / category / f"{stem}.py").is_file() or _plugins_possible()):
        return None
    try:
        module = importlib.import_module(f"operators.{name}")
    except ImportError:  # an optional dependency is missing: the full discovery records why
        return None
    found = [value for value in _defined_operators(module) if value.name == name]
    return found[0] if len(found) == 1 else None


def get_operator(name: str, *, step: str | None = None) -> type[Operator]:
    """The operator class registered as ``name``; the error lists close matches."""
    if not isinstance(name, str):  # None, a class: a bare AttributeError inside before
        raise UnknownOperatorError(f"an operator's name is a text such as 'retrieve.bm25', got {type(name).__name__} "
                                   f"{short_repr(name)}", step=step, field="op")
    alone = _builtin_alone(name)
    remember_stamps()  # the files of the modules imported by now, as imported: a step key tells an edit since
    if alone is not None:
        return alone
    ops = all_operators()
    if name in ops:
        return ops[name]
    for cls in ops.values():
        if name in cls.aliases:
            return cls
    # by full name, by the name after the category ("bm2" for retrieve.bm25) and by alias ("llm_summariser")
    known = {key: full for full, cls in ops.items() for key in (full, full.split(".", 1)[-1], *cls.aliases)}
    category, _, rest = name.partition(".") if "." in name else (None, "", "")
    # and by the name after the category alone, for an operator written in another category (ingest.chunk)
    close = list(dict.fromkeys(known[key] for key in [*close_names(name, known), *close_names(rest, known)]))
    if category is not None and category not in {cls.category() for cls in ops.values()}:
        hint = (f"; no loaded operator is in '{category}': if '{name}' comes from a plugin, load it with "
                f"{ENV_VAR}=<module> or its package's entry point (group {ENTRY_POINT_GROUP})"
                + (f" ({did_you_mean(close)})" if close else "") + f"; see {see_docs('operators')}")
    else:
        hint = f"; {did_you_mean(close)}" if close else f"; known operators: {', '.join(ops)}"
    raise UnknownOperatorError(f"unknown operator '{name}'{hint}", step=step, field="op")


def create(name: str, params: dict[str, Any] | None = None, *, step_id: str | None = None,
           input_steps: tuple[str, ...] = ()) -> Operator:
    """Construct (cheaply: params only) the operator registered as ``name``."""
    return get_operator(name, step=step_id)(params, step_id=step_id, input_steps=input_steps)
