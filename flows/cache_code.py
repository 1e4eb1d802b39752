"""The code part of a step's cache key: which code computed a cached output, so an upgrade or an edit that changes
an operator's code misses the entries its old code stored instead of replaying them.

A step's code is the installed Tessera version plus a digest of the source files that define its operator's class
and each of its base classes (``operators/base.py``, a category's ``base.py``, a plugin's own bases), and those of
the operators it runs inside itself (``Operator.nested_operators``); for a plugin from an installed package, that
package's version too. So editing an operator's file in an editable install misses that operator's entries, editing
``operators/base.py`` misses every operator's, and editing another operator's file misses none of them. Modules the
class's module imports (a helper, a prompt file) are not read: an upgrade changes the version, and while editing
such a helper run with ``--no-cache`` or raise the operator's ``version``.

Each class's file is read once per process, the first time a key needs it, and kept for the class object: the
digest follows the code the process runs (a module reloaded after an edit is new classes, read again), not a file
edited under a running process. Modules are named by their import name, never by path, so two installs of the same
code in other folders (a Ray worker's) compute the same key.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import sys
from importlib import metadata
from typing import Any

from operators.base import Operator

#: A class may name the class whose code computes its output (a placed step's proxy computes its operator's output
#: on a deployment that runs that operator's class): ``cache_code_of = TheOperator`` in its own class body.
CODE_OF = "cache_code_of"


@functools.cache
def tessera_version() -> str:
    """The installed Tessera's version ("unknown" when run from a folder that was never installed)."""
    try:
        return metadata.version("tessera")
    except metadata.PackageNotFoundError:
        return "unknown"


#: Tessera's own top-level packages: their code's version is Tessera's.
_OWN_PACKAGES = ("operators", "flows", "serve")


@functools.lru_cache(maxsize=256)
def package_version(package: str) -> str | None:
    """The version of the installed distribution named like the top-level package ``package`` (a plugin's
    ``mylab`` or ``tessera_mylab`` from ``tessera-mylab``), None for Tessera's own or a package not installed (a
    ``TESSERA_OPERATORS`` module on ``PYTHONPATH``)."""
    if package in _OWN_PACKAGES:
        return None
    try:
        return metadata.version(package)
    except (metadata.PackageNotFoundError, ValueError):
        return None


@functools.lru_cache(maxsize=1024)
def _class_source(klass: type) -> tuple[str, str] | None:
    """(module, digest of the file that defines ``klass``), or None for a class without a source file of its own
    (``object``, the standard library's, one made at run time in a module without a file)."""
    package = klass.__module__.split(".")[0]
    if klass is object or package in sys.stdlib_module_names or package == "builtins":
        return None
    try:
        path = inspect.getsourcefile(klass)
    except (TypeError, OSError):
        return None
    if not path or not os.path.isfile(path):
        return None
    with open(path, "rb") as handle:
        return klass.__module__, hashlib.blake2b(handle.read(), digest_size=8).hexdigest()


@functools.lru_cache(maxsize=1024)
def class_code(cls: type) -> tuple[tuple[str, str], ...]:
    """(module, file digest) of each module that defines ``cls`` or one of its bases, in method resolution order."""
    cls = vars(cls).get(CODE_OF, cls)
    found: dict[str, str] = {}
    for klass in cls.__mro__:
        source = _class_source(klass)
        if source is not None:
            found.setdefault(*source)
    return tuple(found.items())


def code_identity(op: Operator) -> dict[str, Any]:
    """What the step key holds of the code that computes ``op``'s output: the Tessera version, the modules that
    define its classes (readable in ``tessera cache explain``), one digest of their files and, for a plugin from an
    installed package, that package's version."""
    modules: dict[str, str] = {}
    for _, each in op.walk():
        for module, digest in class_code(type(each)):
            modules.setdefault(module, digest)
    source = hashlib.blake2b(repr(sorted(modules.items())).encode(), digest_size=8).hexdigest()
    code: dict[str, Any] = {"tessera": tessera_version(), "modules": sorted(modules), "source": source}
    versions = {top: package_version(top) for top in sorted({module.split(".")[0] for module in modules})}
    if any(versions.values()):  # a plugin's installed package: its version covers the helpers its files import
        code["packages"] = {top: version for top, version in versions.items() if version}
    return code
