"""Why this user cannot reach a path: a folder on the way it may not enter, or the folder itself that it may not
list (their modes). Sources and indices ask before they read or write, so that such a path is one line naming the
folder, not an internal ``PermissionError`` or a "not found"."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: A path as Windows writes it: a drive (``C:\\``, ``C:/``), a share (``\\\\server``), or ``.\\`` and ``..\\``.
_WINDOWS = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\|\.{1,2}\\)")


def windows_path(text: str) -> str | None:
    """Why ``text``, a path written as Windows writes it (``C:\\Users\\me\\q.tsv``, from a spec or a command copied
    from a Windows machine), names nothing here, or None: on this machine it is a relative name, "not found" in the
    working directory, or, with a space in it, a query's text."""
    if os.name == "nt" or not _WINDOWS.match(text.strip()):
        return None
    return "a Windows path, which names no file on this machine: give its path here, such as /mnt/c/... for C: in WSL"


def unreachable(path: str | Path) -> str | None:
    """Why this user cannot reach ``path`` (a folder it may not enter on the way, or ``path`` a folder it may not
    list), or None: reachable, or not there (whoever asked says that)."""
    path = Path(os.path.expanduser(path))
    for step in (*reversed(path.parents), path):
        try:
            os.stat(step)
        except PermissionError:  # its folder may be listed, but not entered
            return f"this user may not enter the folder {step.parent} (permission denied)"
        except OSError:
            return None
    if path.is_dir():
        try:
            os.listdir(path)
        except PermissionError:
            return f"this user may not list the folder {path} (permission denied)"
    return None
