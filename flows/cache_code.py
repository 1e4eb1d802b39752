"""The code part of a step's cache key: which code computed a cached output, so an upgrade or an edit that changes
an operator's code misses the entries its old code stored instead of replaying them.

A step's code is the installed Tessera version plus a digest of the source files that define its operator's class
and each of its base classes (``operators/base.py``, a category's ``base.py``, a plugin's own bases), and those of
the operators it runs inside itself (``Operator.nested_operators``); then of the modules of Tessera's own packages
(``operators``, ``flows``, ``serve``), of each importing file's own top-level package (a plugin's helpers), and of
code no installed version covers (``is_local``: a ``TESSERA_OPERATORS`` module's helper beside it), that those files
import, transitively: a helper such as ``operators/sources/_documents.py`` or ``mylab/_helpers.py``,
wherever its import stands (a lazy one in ``setup()`` too). For a plugin from an installed package, that package's
version too. So editing an operator's file or a helper it imports in an editable install misses that operator's
entries, editing ``operators/base.py`` (or a module it imports) misses every operator's, and editing another
operator's file misses none of them. Third-party packages are covered by their versions, not read; files that are
not Python (a prompt template) are not read: while editing one run with ``--no-cache`` or raise the operator's
``version``.

Imports are found in each module's bytecode (``modulefinder``'s scanner, on the code Python's bytecode cache holds,
as an import loads it), not by importing anything nor by the imported module's ``__dict__``, which misses the
imports inside functions. Each class's files are digested once per process, the first time a key needs them, and
kept for the class object; a file that several classes import is read once (again when its size or times change) and
its imports are scanned once for its content. The digest follows the code the process runs (a module reloaded after
an edit is new classes, read again); a plugin's module (its class's, or a helper of its package imported by then)
whose file changed since the plugin registered (``operators.imported_code.imported_source``: edited under a running
notebook, not reloaded) gets a digest of this process alone, so its output is never replayed to a process that runs
the edit. Modules are named by their import name, never by path, so two installs of the same code in other folders
(a Ray worker's) compute the same key.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import logging
import modulefinder
import os
import sys
import time
import types
import uuid
from importlib import metadata
from typing import Any

from flows.cache_cell_code import cell_class_digest
from operators.base import Operator
from operators.imported_code import BUILT_IN_TOPS, changed_since_import, imported_source, is_local

log = logging.getLogger(__name__)

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


@functools.lru_cache(maxsize=256)
def package_version(package: str) -> str | None:
    """The version of the installed distribution named like the top-level package ``package`` (a plugin's
    ``mylab`` or ``tessera_mylab`` from ``tessera-mylab``), None for Tessera's own or a package not installed (a
    ``TESSERA_OPERATORS`` module on ``PYTHONPATH``)."""
    if package in BUILT_IN_TOPS:
        return None
    try:
        return metadata.version(package)
    except (metadata.PackageNotFoundError, ValueError):
        return None


def _spec(module: str) -> importlib.machinery.ModuleSpec | None:
    """Where ``module`` is imported from, or would be: found by Python's path finder in its parent package's
    folders, never by importing it or its parents (a package's ``__init__`` may import torch)."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return getattr(loaded, "__spec__", None)
    parent, _, name = module.rpartition(".")
    locations = None
    if parent:
        parent_spec = _spec(parent)
        locations = parent_spec.submodule_search_locations if parent_spec is not None else None
        if not locations:  # the parent is a module, not a package, or is not there
            return None
    return _find_spec(name, tuple(locations) if locations else None)


@functools.lru_cache(maxsize=4096)
def _find_spec(name: str, locations: tuple[str, ...] | None) -> importlib.machinery.ModuleSpec | None:
    """Python's path finder's answer for a module not imported, once per process."""
    return importlib.machinery.PathFinder.find_spec(name, list(locations) if locations else None)


#: Scans one code object for its import instructions (``modulefinder``'s scanner: the standard library keeps it in
#: step with each Python's bytecode); ``ModuleFinder.run_script`` would follow every import into the standard
#: library and third-party packages, which their versions already cover.
_SCANNER = modulefinder.ModuleFinder()
_IMPORT_NAME = dis.opmap["IMPORT_NAME"]


def _code_imports(module: str, is_package: bool, code: types.CodeType) -> tuple[str, ...]:
    """The modules of Tessera's own packages, of ``module``'s own top-level package (a plugin's helpers) and of code
    no installed version covers (``is_local``), that ``module``'s import statements name, wherever they stand (a
    lazy import in ``setup()`` too). ``from P import name`` names ``P.name`` where that is a module, else ``P``; a
    relative import is resolved as Python does."""
    package = module if is_package else module.rpartition(".")[0]
    own = module.partition(".")[0]
    found: list[str] = []
    codes = [code]
    for each in codes:
        codes.extend(const for const in each.co_consts if isinstance(const, types.CodeType))
        if _IMPORT_NAME not in each.co_code[::2]:  # an instruction is two bytes, its operation first
            continue  # imports nothing (most functions): not scanned
        for kind, args in _SCANNER.scan_opcodes(each):
            if kind == "absolute_import":
                fromlist, base = args
            elif kind == "relative_import":
                level, fromlist, name = args
                try:
                    base = importlib.util.resolve_name("." * level + name, package)
                except ImportError:  # beyond the top-level package: the import fails when it runs
                    continue
            else:
                continue
            top = base.partition(".")[0]
            if top not in (*BUILT_IN_TOPS, own) and not is_local(top):
                continue
            submodules = [f"{base}.{name}" for name in fromlist or () if name != "*"]
            submodules = [name for name in submodules if _spec(name) is not None]
            found.extend(submodules)
            if not fromlist or len(submodules) < len(fromlist):  # a name of the module itself: its code counts
                found.append(base)
    return tuple(dict.fromkeys(name for name in found if name != module))


@functools.lru_cache(maxsize=2048)
def _file_imports(module: str, path: str, digest: str) -> tuple[str, ...]:
    """The own modules that the file at ``path`` (its content's ``digest``) imports, scanned once per process. Its
    code comes from Python's bytecode cache where that is current, as an import's does: compiling every file again
    would cost about ten times as much."""
    if not path.endswith(".py"):
        return ()
    try:
        code = importlib.machinery.SourceFileLoader(module, path).get_code(module)
    except (SyntaxError, ValueError, OSError, ImportError):  # not Python this one can compile: its digest counts
        return ()
    return _code_imports(module, os.path.basename(path) == "__init__.py", code)


def _module_code(module: str, path: str | None = None) -> tuple[str, tuple[str, ...]] | None:
    """(digest of its file, the own modules it imports) of ``module``, from ``path`` or where it is imported from
    (or would be), None for a module without a source file. A file is read once per process however many classes
    import it (54 operators made 1,071 reads of 146 files), and again once its stamp (size, modification and change
    times, inode) changes, as any edit changes it."""
    if path is None:
        spec = _spec(module)
        path = spec.origin if spec is not None and spec.has_location else None
    try:
        stat = os.stat(path)
    except (TypeError, OSError):  # no path, a file gone
        return None
    stamp = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    known = _files.get((module, path))
    if known is not None and known[0] == stamp:
        return known[1]
    try:
        with open(path, "rb") as handle:
            digest = hashlib.blake2b(handle.read(), digest_size=8).hexdigest()
    except OSError:  # a folder (a namespace package), a file gone since its stat
        return None
    code = digest, _file_imports(module, path, digest)
    if time.time_ns() - stat.st_ctime_ns > _RACY_NS:
        _files[(module, path)] = (stamp, code)
    return code


#: (module, path) -> (stamp, ``_module_code``) of each file read, while its stamp holds.
_files: dict[tuple[str, str], tuple[tuple[int, ...], tuple[str, tuple[str, ...]]]] = {}
#: A file changed this recently is read every time: file times move by the kernel's clock tick (milliseconds), so a
#: second edit of the same size within one tick would keep the stamp (git treats such "racily clean" files alike).
_RACY_NS = 2_000_000_000


def _class_file(klass: type) -> tuple[str, str] | None:
    """(module, path of the file that defines ``klass``), or None for a class without a source file of its own
    (``object``, the standard library's, one made at run time in a module without a file)."""
    package = klass.__module__.split(".")[0]
    if klass is object or package in sys.stdlib_module_names or package == "builtins":
        return None
    try:
        path = inspect.getsourcefile(klass)
    except (TypeError, OSError):
        return None
    return (klass.__module__, path) if path else None


@functools.lru_cache(maxsize=1024)
def class_code(cls: type) -> tuple[tuple[str, str], ...]:
    """(module, file digest) of each module that defines ``cls`` or one of its bases, in method resolution order,
    then of the modules of Tessera's own packages that those import, transitively (breadth first)."""
    cls = vars(cls).get(CODE_OF, cls)
    found: dict[str, str] = {}
    pending: list[str] = []
    for klass in cls.__mro__:
        where = _class_file(klass)
        if where is None and (cell := cell_class_digest(klass)) is not None:  # a notebook's class: no file
            found.setdefault(f"{klass.__module__}.{klass.__qualname__}", cell)
            continue
        code = _module_code(*where) if where is not None and where[0] not in found else None
        if code is not None:
            found[where[0]] = _running(where[0], code[0])
            pending.extend(code[1])
    for module in pending:  # grows as it goes: each helper's own imports are read in turn
        if module not in found and (code := _module_code(module)) is not None:
            found[module] = _running(module, code[0])
            pending.extend(code[1])
    return tuple(found.items())


def _running(module: str, digest: str) -> str:
    """``digest``, the file's now, where it is the code that runs; for a module whose file changed since it was
    imported (edited under a notebook, not reloaded), a digest of this process alone. The file's digest would key the
    old code's output as the new code's: a later process, running the edit, replayed it. A plugin's module (its
    class's or a helper of its package) is compared by its digest when the plugin registered, a built-in's or another
    module's by its file's stamp when it was imported (``operators.imported_code.changed_since_import``)."""
    imported = imported_source(module)
    if imported is None:
        if not changed_since_import(module):
            return digest
        imported = digest
    elif imported == digest:
        return digest
    if (module, imported) not in _warned:
        _warned.add((module, imported))
        log.warning("the file of %s changed since this process imported it: the steps whose code it is are cached "
                    "for this process alone until the module is reloaded (importlib.reload) or the process restarts",
                    module)
    return f"{imported}+edited-{_PROCESS}"


#: What makes the key of code whose file changed under this process its own: no other process computes it.
_PROCESS = uuid.uuid4().hex[:16]
_warned: set[tuple[str, str]] = set()


def code_identity(op: Operator) -> dict[str, Any]:
    """What the step key holds of the code that computes ``op``'s output: the Tessera version, the modules that
    define its classes (readable in ``tessera cache explain``), one digest of their files and, for a plugin from an
    installed package, that package's version."""
    modules = module_digests(op)
    source = hashlib.blake2b(repr(sorted(modules.items())).encode(), digest_size=8).hexdigest()
    code: dict[str, Any] = {"tessera": tessera_version(), "modules": sorted(modules), "source": source}
    versions = {top: package_version(top) for top in sorted({module.split(".")[0] for module in modules})}
    if any(versions.values()):  # a plugin's installed package: its version covers the helpers its files import
        code["packages"] = {top: version for top, version in versions.items() if version}
    return code


def module_digests(op: Operator) -> dict[str, str]:
    """Module -> digest of its file, for every module ``code_identity`` covers: what the cache records beside a
    step's key (not in it), so ``tessera cache explain`` can name the module whose edit changed the key."""
    modules: dict[str, str] = {}
    for _, each in op.walk():
        for module, digest in class_code(type(each)):
            modules.setdefault(module, digest)
    return modules


def own_modules(op: Operator) -> list[str]:
    """The modules that define ``op``'s own classes (and its nested operators'): the files a user edits, shown
    first by ``tessera cache explain`` among the dozens of Tessera modules they import."""
    return sorted({vars(type(each)).get(CODE_OF, type(each)).__module__ for _, each in op.walk()})
