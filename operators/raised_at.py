"""Where in a step's own code an exception came from, for the ``OperatorError`` that names the step.

Why: a plugin's ``transform`` that raised ``KeyError('txt')`` reached its author as ``step 'flag', operator
'mylab.keyword_flag': KeyError: 'txt'`` and nothing more: no file, no line. The traceback was behind ``--debug``,
and on Ray not even there (the error is rebuilt from the worker's message). So the message names the last line of
the operator's own package that the exception passed through (``mylab/operators.py:23, in transform``): the line
that raised, or that called the library that did. Paths are shown from the folder on ``sys.path`` that holds the
package, so no home folder or virtualenv is spelt out.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path


def _own_root(cls: type) -> tuple[str, str] | None:
    """(the folder or file of ``cls``'s top-level package, the folder its paths are shown from), or None."""
    top = sys.modules.get(cls.__module__.split(".")[0])
    file = getattr(top, "__file__", None)
    if not file:
        return None
    file = os.path.realpath(file)
    if Path(file).name == "__init__.py":  # a package: every file under its folder is its own
        folder = os.path.dirname(file)
        return folder, os.path.dirname(folder)
    return file, os.path.dirname(file)  # a single module (a TESSERA_OPERATORS script, __main__)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def raised_at(err: BaseException, cls: type) -> str:
    """`` (at mylab/operators.py:23, in transform)``: the innermost frame of ``err``'s traceback in the package
    that defines ``cls``, else the innermost frame of all; empty when the traceback holds none."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    root = _own_root(cls)
    own = [f for f in frames if root and _inside(os.path.realpath(f.filename), root[0])]
    frame = (own or frames)[-1]
    path = os.path.realpath(frame.filename)
    shown = os.path.relpath(path, root[1]) if own and root else Path(path).name
    return f" (at {shown}:{frame.lineno}, in {frame.name})"
