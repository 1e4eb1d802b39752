"""What to write in ``TESSERA_OPERATORS`` when what was written there does not import.

Why: it takes module names, and people give it what they have at hand: the file (``mylab/operators.py``), an entry
point's ``module:Class``, a class's dotted path, or the right name from the folder that holds the package, which the
``tessera`` command does not import from (its ``sys.path`` starts at the script's folder, not the working one). Each
was ``ModuleNotFoundError: No module named ...``, which says what is missing and not what to write.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

from operators.error_text import close_names, did_you_mean


def module_hint(name: str, err: BaseException) -> str:
    """``; ...`` saying what to write for ``name``, a ``TESSERA_OPERATORS`` entry that failed to import with
    ``err``; empty when the failure is the module's own (an import inside it, its code)."""
    if name.endswith(".py") or "/" in name or os.sep in name:
        return _file_hint(name)
    if ":" in name:
        module = name.partition(":")[0]
        return (f"; it takes module names, not module:Class: name '{module}' (each named operator it defines is "
                "registered); an entry point may name one class")
    if not isinstance(err, ModuleNotFoundError) or not err.name or not name.startswith(err.name):
        return ""  # the module was found: what failed is inside it
    parent, _, last = name.rpartition(".")
    package = _imported(parent) if parent and err.name == name else None
    if inspect.isclass(getattr(package, last, None)):
        return f"; {last} is a class: name its module, '{parent}' (each named operator it defines is registered)"
    if hasattr(package, "__path__"):
        meant = did_you_mean(f"{parent}.{sub}" for sub in close_names(last, [
            info.name for info in pkgutil.iter_modules(package.__path__)]))
        return meant and f"; {meant}"
    top = name.split(".")[0]
    if err.name == top and _beside(top) and not _working_folder_on_path():
        return (f"; '{top}' is in the working folder, which the tessera command does not import from: run it with "
                "PYTHONPATH=. (or install the package)")
    if err.name == top:
        return f"; put the folder that holds '{top}' on PYTHONPATH, or install its package in {sys.executable}"
    return ""


def tessera_name_problem(name: str, tessera_tops: tuple[str, ...]) -> str | None:
    """Why ``name`` cannot be a plugin's module: it starts with one of Tessera's own packages (a user's
    ``operators.py``, as the docs' ``mylab/operators.py`` flattened), so Python imports Tessera's, which was said to
    define no operator and listed Tessera's submodules to name."""
    top = name.split(".")[0]
    if top not in tessera_tops:
        return None
    files = [Path(entry or ".").resolve() / f"{top}.py" for entry in [os.getcwd(), *sys.path]]
    yours = next((f" ({file})" for file in files if file.is_file()), "")  # a module file is never Tessera's
    return (f"'{top}' is Tessera's own package, so Python imports Tessera's and not your module{yours}: give your "
            f"module a name of its own (mylab_{top}.py, named TESSERA_OPERATORS=mylab_{top})")


def package_hint(module: ModuleType) -> str:
    """For a package that defines no operator itself: its submodules, which nothing imported."""
    if not hasattr(module, "__path__"):
        return ""
    subs = sorted(info.name for info in pkgutil.iter_modules(module.__path__) if not info.name.startswith("_"))
    if not subs:
        return ""
    named = ", ".join(f"'{module.__name__}.{sub}'" for sub in subs[:3])
    return (f"; its submodules are not imported for you: name them ({named}) or import their operators in "
            f"{module.__name__}'s __init__.py")


def _file_hint(name: str) -> str:
    """The module name of the file ``name`` and the folder to put on ``PYTHONPATH`` for it."""
    path = Path(name).expanduser().resolve()
    if path.suffix == ".py":
        path = path.with_suffix("")
    parts = [path.name]
    folder = path.parent
    while (folder / "__init__.py").is_file():  # inside a package: the name starts at its top
        parts.insert(0, folder.name)
        folder = folder.parent
    dotted = ".".join(parts)
    where = "PYTHONPATH=." if folder == Path.cwd() else f"PYTHONPATH={folder}"
    return f"; it takes module names, not files: name '{dotted}', with {where} so that Python finds it"


def _imported(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - no hint then
        return None


def _beside(top: str) -> bool:
    here = Path.cwd()
    return (here / top / "__init__.py").is_file() or (here / f"{top}.py").is_file()


def _working_folder_on_path() -> bool:
    here = os.path.realpath(os.getcwd())
    return any(os.path.realpath(entry or ".") == here for entry in sys.path)
