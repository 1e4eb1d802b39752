"""Plugin operators on Ray's workers, checked before a run starts.

A worker unpickles a step's operator by importing the module of its class. A plugin found only through the
driver's ``sys.path`` (a notebook that inserts its folder, then sets ``TESSERA_OPERATORS``) is not on the
workers' path: Ray gives them the driver's environment (``PYTHONPATH``), its script's folder and working
directory, not its ``sys.path``. The run then failed in Ray's unpickling, with a worker traceback on stderr and
no step of its own. Here one small task asks a worker to import every plugin module the run's steps come from;
one it cannot import is a ``SpecError`` naming the first step that needs it and how to make it importable.

A class that travels by value instead (defined in ``__main__``, a notebook's or a script's, or in a function) is
pickled whole, with the module globals its methods use: one that uses a lock, a connection or an open file failed
in Ray's serialisation with a bare ``TypeError`` and a page of Ray's diagnosis, naming no step. Every step's class
and params are pickled here first; one that cannot be is the same ``SpecError``, naming the step and what to do.

Tessera does not ship the module to the workers itself (``runtime_env`` ``py_modules``): a per-stage runtime
environment would start workers of their own for each, and a cluster that joins ``RAY_ADDRESS`` gets its code
the way its operator chose. Modules a worker imported are remembered for the Ray job, so the check costs one
task per new plugin module.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path
from typing import Iterable

import ray
from ray import cloudpickle

from flows.spec import Flow
from operators.errors import SpecError, see_docs
from operators.imported_code import BUILT_IN_PACKAGES

_lock = threading.Lock()
_importable: set[tuple[str, str]] = set()  # (Ray job id, module) a worker imported


class PluginNotOnWorkersError(SpecError):
    """A step's operator comes from a module that Ray's workers cannot import, or Ray cannot pickle it for them;
    nothing was run."""


def plugin_modules(flow: Flow, steps: Iterable[str]) -> dict[str, str]:
    """The modules, outside Tessera, of the operators of ``steps``, each with the first step that needs it.

    A class defined in ``__main__``, in a function or in a module registered with Ray's cloudpickle
    ``register_pickle_by_value`` travels by value and needs no import."""
    modules: dict[str, str] = {}
    for step in steps:
        cls = type(flow.operators[step])
        if cls.__module__.startswith(BUILT_IN_PACKAGES) or _travels_by_value(cls):
            continue
        modules.setdefault(cls.__module__, step)
    return modules


def _travels_by_value(cls: type) -> bool:
    """Whether cloudpickle sends ``cls`` itself rather than its module's name: a class of ``__main__``, of a function,
    or of a module registered with ``register_pickle_by_value``."""
    parts = cls.__module__.split(".")
    by_value = cloudpickle.list_registry_pickle_by_value()
    return cls.__module__ == "__main__" or "<locals>" in cls.__qualname__ \
        or any(".".join(parts[:i]) in by_value for i in range(1, len(parts) + 1))


def check_operators_pickle(flow: Flow, steps: Iterable[str]) -> None:
    """Raise ``PluginNotOnWorkersError`` for the first step whose operator class and params Ray cannot pickle, as
    its stages send them (a class that travels by value with a lock among the globals its methods use)."""
    for step in steps:
        op = flow.operators[step]
        try:
            cloudpickle.dumps((type(op), op.params.model_dump()))
        except Exception as err:  # noqa: BLE001 - whatever pickling raises, it is the answer
            what = f"{type(err).__name__}: {err}".splitlines()[0]
            if _travels_by_value(type(op)):
                where = ("defined in __main__ (the notebook or the script)" if type(op).__module__ == "__main__"
                         else f"defined in {type(op).__module__}.{type(op).__qualname__}")
                advice = ("make what cannot be pickled (a lock, a connection, an open file) in setup() instead of "
                          "at module level or on the class, or move the class into a module file that "
                          "TESSERA_OPERATORS names and the workers can import")
                raise PluginNotOnWorkersError(
                    f"operator {op.name} is {where}, so Ray sends the class itself to its workers, with the globals "
                    f"its methods use, and it cannot be pickled ({what}): {advice}; see {see_docs('executors')}",
                    step=step, field=f"steps.{step}.op") from None
            raise PluginNotOnWorkersError(f"operator {op.name}'s params cannot be pickled for Ray's workers ({what})",
                                          step=step, field=f"steps.{step}.params") from None


@ray.remote(num_cpus=0)
def _import_modules(modules: list[str]) -> dict[str, str]:
    """On a worker: the modules it cannot import, with the error's one line."""
    problems = {}
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as err:  # noqa: BLE001 - whatever the import raises, it is the answer
            problems[module] = f"{type(err).__name__}: {err}".splitlines()[0]
    return problems


def check_plugins_on_workers(flow: Flow, steps: Iterable[str]) -> None:
    """Raise ``PluginNotOnWorkersError`` for the first step whose operator Ray cannot pickle
    (``check_operators_pickle``) or whose operator's module a Ray worker cannot import."""
    steps = list(steps)
    check_operators_pickle(flow, steps)
    modules = plugin_modules(flow, steps)
    job = ray.get_runtime_context().get_job_id()
    with _lock:
        unknown = [m for m in modules if (job, m) not in _importable]
    if not unknown:
        return
    problems = ray.get(_import_modules.remote(unknown))
    with _lock:
        _importable.update((job, m) for m in unknown if m not in problems)
    if problems:
        module = next(m for m in unknown if m in problems)
        step = modules[module]
        raise PluginNotOnWorkersError(
            f"operator {flow.operators[step].name} comes from module '{module}', which Ray's workers cannot import "
            f"({problems[module]}): install its package where the workers run, or put its folder on PYTHONPATH "
            f"before Ray starts{_folder_hint(module)} (a cluster's workers take the PYTHONPATH of the shell that ran "
            "`ray start` on their node, not this process's), or start Ray with runtime_env py_modules or working_dir; "
            f"see {see_docs('executors')}", step=step, field=f"steps.{step}.op")


def _folder_hint(module: str) -> str:
    """`` (PYTHONPATH=<folder>)``: the folder that holds the module's top package on the driver, when known."""
    top = sys.modules.get(module.split(".", 1)[0])
    package = list(getattr(top, "__path__", None) or [])  # a package (a namespace one has no __file__)
    path = package[0] if package else getattr(top, "__file__", None)
    return f" (PYTHONPATH={Path(path).parent})" if path else ""
