"""Operator discovery: a new operator is one new file under ``operators/<category>/``.

Every module in a category package is imported once and every ``Operator``
subclass with a ``name`` defined in it is registered under that name; a category's
``base.py`` (its abstract contract, a class without a name) registers nothing.
Modules whose optional dependencies are missing are skipped with a note
(``tessera ops`` shows it).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from pathlib import Path
from typing import Any

from operators.base import Operator
from operators.errors import UnknownOperatorError

# The operators package, scanned by path: importing it from here would make a circle, since its
# __init__ re-exports the registry.
_PACKAGE = Path(__file__).resolve().parent
# Packages under operators/ that hold shared building blocks, not operators.
_NOT_CATEGORIES = {"testing", "models", "store", "llm"}

_lock = threading.Lock()
_registry: dict[str, type[Operator]] = {}
_skipped: dict[str, str] = {}
_loaded = False


def _discover() -> None:
    global _loaded
    with _lock:
        if _loaded:
            return
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
                    if (
                        isinstance(value, type)
                        and issubclass(value, Operator)
                        and value.__module__ == module_name
                        and value.name
                    ):
                        other = _registry.get(value.name)
                        if other is not None and other is not value:
                            raise RuntimeError(
                                f"[Internal] operator name '{value.name}' is used by both "
                                f"{other.__module__}.{other.__name__} and {module_name}.{value.__name__}"
                            )
                        _registry[value.name] = value
        _loaded = True


def all_operators() -> dict[str, type[Operator]]:
    """Every registered operator, by name, sorted."""
    _discover()
    return dict(sorted(_registry.items()))


def skipped_modules() -> dict[str, str]:
    """Operator modules that could not be imported, with the reason."""
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
