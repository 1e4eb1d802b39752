"""The code this process imported, as it was imported: what the step key compares a module's file with.

Why: a step's cache key digests the files of its operator's modules (``flows.cache_code``), and a file edited under
a running process is not the code that runs. A plugin's modules are digested when it registers (``remember_source``);
Tessera's own and code that no installed version covers (``is_local``) are stamped by size and times when an operator
is looked up (``remember_stamps``, ``changed_since_import``). Kept apart from ``operators.plugins``, which checks what
a plugin brings.
"""

from __future__ import annotations

import functools
import hashlib
import os
import site
import sys
import sysconfig
import weakref
from importlib import machinery
from typing import Any

#: Module prefixes that ship with Tessera (not a plugin's): importable wherever Tessera runs.
BUILT_IN_PACKAGES = ("operators.", "flows.", "serve.")
#: The same, as top-level package names.
BUILT_IN_TOPS = tuple(prefix.rstrip(".") for prefix in BUILT_IN_PACKAGES)


def remember_source(cls: type) -> None:
    """Record, once per class, the digest of the file of ``cls``'s module and of each module of its top-level package
    imported by then (its helpers): when it registers, just after its module's import, or where a Ray worker first
    builds one of its operators (``flows.executors._ray_udfs``). Tessera's own classes are no plugin's: none (the
    stamps of every module imported by then, Tessera's too, are recorded: ``remember_stamps``)."""
    remember_stamps()
    if cls in _remembered or cls.__module__.startswith(BUILT_IN_PACKAGES):
        return
    _remembered.add(cls)
    own, top = cls.__module__, cls.__module__.partition(".")[0]
    for name, module in sys.modules.copy().items():  # one copy: list(items()) can fail while another thread imports
        if not (name == own or own != "__main__" and (name == top or name.startswith(top + "."))):
            continue
        if name in _imported_sources:
            imported_source(name)  # recorded before: again if it was executed anew since (a reload, a new import)
        else:
            _record(name, module)


def remember_stamps() -> None:
    """Record the stamp (size, modification and change times, inode) of the file of each module imported by now whose
    code a step key reads, as it was imported: Tessera's own (a built-in operator of an editable install) and code
    no installed version covers (``is_local``). ``changed_since_import`` compares it with the file when a key reads
    it, as ``imported_source`` does a plugin's digest. Called where operators are looked up (``get_operator``),
    registered and built on a Ray worker; it looks again only once another module was imported."""
    global _modules_seen
    seen = _modules_now()
    if seen == _modules_seen:
        return
    _modules_seen = seen
    # A copy (one C call): another thread's import changed sys.modules while list(items()) read it, a request of the
    # service failed with "dictionary changed size during iteration".
    for name, module in sys.modules.copy().items():
        if not (name.startswith(BUILT_IN_PACKAGES) or is_local(name.partition(".")[0])):
            continue  # by its name first: an installed package's module is never touched
        spec, known = _own_attribute(module, "__spec__"), _stamps.get(name)
        if known is None or known[0] is not spec:
            _stamps[name] = (spec, _stamp(_own_attribute(module, "__file__")))


def _modules_now() -> tuple[int, str | None, int]:
    """The count of modules imported, the last one's name and its id: an import adds its module last, so the same
    three mean no import since. Another thread's import between the iterator's making and its step is a change."""
    try:
        last = next(reversed(sys.modules), None)
    except RuntimeError:  # dictionary changed size during iteration
        return (-1, None, 0)
    return (len(sys.modules), last, id(sys.modules.get(last)))


def _own_attribute(module: Any, name: str) -> Any:
    """``module``'s attribute ``name`` as it holds it, None where it has none: read past an overridden attribute
    lookup, which a module that ``importlib.util.LazyLoader`` imports runs its whole import on."""
    try:
        return object.__getattribute__(module, name)
    except AttributeError:
        return None


def changed_since_import(module: str) -> bool:
    """Whether the file of ``module`` changed since ``remember_stamps`` saw it imported (edited under a running
    notebook, not reloaded; a reload executes it anew, from the file as it is then: not changed)."""
    known, loaded = _stamps.get(module), sys.modules.get(module)
    if known is None or known[1] is None or loaded is None or _own_attribute(loaded, "__spec__") is not known[0]:
        return False
    return _stamp(_own_attribute(loaded, "__file__")) != known[1]


def _stamp(path: str | None) -> tuple[int, ...] | None:
    try:
        stat = os.stat(path or "")
    except (TypeError, OSError):  # a module without a file, a file gone
        return None
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino


#: Module -> (the spec it was executed from, its file's stamp then), for ``changed_since_import``.
_stamps: dict[str, tuple[Any, tuple[int, ...] | None]] = {}
_modules_seen: tuple[int, str | None, int] | None = None


@functools.lru_cache(maxsize=1024)
def is_local(top: str) -> bool:
    """Whether the top-level module or package ``top`` is code that no installed version covers, whose files a step
    key reads as it reads a plugin's own: found on the path outside the standard library and the site-packages
    folders (a ``TESSERA_OPERATORS`` module's helper beside it, a lab's ``labutils`` folder, a package installed
    editable, whose version stays while its files change). Installed packages count by their versions instead."""
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or top in ("__main__", *BUILT_IN_TOPS):
        return False
    loaded = sys.modules.get(top)
    try:  # found as an import would find it, without importing it (a package's __init__ may import torch)
        spec = _own_attribute(loaded, "__spec__") if loaded is not None else machinery.PathFinder.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    where = [spec.origin] if spec.has_location else list(spec.submodule_search_locations or ())
    where = [os.path.realpath(path) for path in where if path]
    return bool(where) and not any(path.startswith(_INSTALLED) for path in where)


def _installed_folders() -> tuple[str, ...]:
    """The folders installed packages and the standard library live in (each with a trailing separator)."""
    paths = sysconfig.get_paths()
    folders = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(name)}
    folders.update(site.getsitepackages() + [site.getusersitepackages()])
    return tuple(os.path.join(os.path.realpath(folder), "") for folder in folders)


_INSTALLED = _installed_folders()


def imported_source(module: str) -> str | None:
    """The digest (blake2b, 8 bytes, as ``flows.cache_code`` digests a file) of ``module``'s file as it was when a
    plugin of its package registered, or when the module was last executed anew (``importlib.reload``, which gives
    it a new spec); None for a module no plugin recorded or one without a file."""
    known = _imported_sources.get(module)
    if known is None:
        return None
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(loaded, "__spec__", None) is not known[0]:  # reloaded since: its file now
        return _record(module, loaded)
    return known[1]


def _record(name: str, module: Any) -> str | None:
    digest = _file_digest(getattr(module, "__file__", None))
    _imported_sources[name] = (getattr(module, "__spec__", None), digest)
    return digest


#: Module -> (the spec it was executed from, the digest of its file then), recorded when a plugin class of its
#: package registered, just after the import (on a Ray worker: when it first built one of its operators): what the
#: step cache compares with the file it reads for the key (``flows.cache_code``), so a file edited under the running
#: process is not taken for the code that runs.
_imported_sources: dict[str, tuple[Any, str | None]] = {}
_remembered: "weakref.WeakSet[type]" = weakref.WeakSet()


def _file_digest(path: str | None) -> str | None:
    try:
        with open(path or "", "rb") as handle:
            return hashlib.blake2b(handle.read(), digest_size=8).hexdigest()
    except (TypeError, OSError):  # a module without a file (a notebook's __main__), a file gone
        return None
