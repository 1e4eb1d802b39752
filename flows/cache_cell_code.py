"""The code of an operator class defined in a notebook cell, for its step key.

Such a class has no source file (its module is the kernel's ``__main__``), so its key held only its bases' files: a
class edited and run again in the same kernel with ``cache=True`` replayed the old class's output, without a word.
Its digest is read from the class itself: the bytecode, names and constants of its methods (and of the functions
they define) and its plain class attributes (``version``, a label), so it is the same in a Ray worker, which gets
the class by value, and in the next kernel that runs the same cell. Module globals and helpers of other cells that
the methods call are not read: raise the class's ``version`` when you change one of those.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any

#: Class attributes read as they are (by ``repr``): what a method may read as ``self.LABEL``.
PLAIN = (str, bytes, int, float, complex, bool, type(None))


def cell_class_digest(klass: type) -> str | None:
    """A digest of ``klass``'s own code, for a class of ``__main__`` (a notebook's, a script's); None for another."""
    if klass.__module__ != "__main__":
        return None
    digest = hashlib.blake2b(digest_size=8)
    for name, value in sorted(vars(klass).items()):
        if name.startswith("__") and name.endswith("__") and not isinstance(value, types.FunctionType):
            continue  # __dict__, __module__, __doc__, ...: no code
        digest.update(name.encode() + b"\0" + _part(value) + b"\0")
    return digest.hexdigest()


def _part(value: Any) -> bytes:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return b"|".join(_part(f) for f in (value.fget, value.fset, value.fdel))
    if isinstance(value, types.FunctionType):
        return _code(value.__code__) + _plain(value.__defaults__)
    if isinstance(value, type) and value.__module__ == "__main__":  # a nested class (its Params)
        return (cell_class_digest(value) or "").encode()
    return _plain(value)


def _code(code: types.CodeType) -> bytes:
    """The code's bytecode, names and constants (the code of the functions it defines too), not its file or lines:
    a cell moved or run under another number keeps its digest."""
    parts = [code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()]
    parts += [_code(c) if isinstance(c, types.CodeType) else _plain(c) for c in code.co_consts]
    return b"(" + b",".join(parts) + b")"


def _plain(value: Any) -> bytes:
    if isinstance(value, PLAIN):
        return repr(value).encode()
    if isinstance(value, (tuple, list)):
        return b"[" + b",".join(_plain(v) for v in value) + b"]"
    if isinstance(value, frozenset):  # (a set's order follows string hashing, which changes per process)
        return b"{" + b",".join(sorted(_plain(v) for v in value)) + b"}"
    return type(value).__name__.encode()  # an object: its kind only (its repr may hold an address)
