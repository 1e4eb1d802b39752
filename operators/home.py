"""Tessera's home folder: saved flows, the step cache, named indices, model exports.

An unusable setting is a ``SettingError`` (exit 2 in every command, as other settings are), raised where the home is
asked for: an empty ``$HOME`` made the default ``/.tessera`` in silence.
"""

from __future__ import annotations

import os
from pathlib import Path

from operators.errors import SettingError, short_repr


def tessera_home() -> Path:
    """``$TESSERA_HOME``, default ``~/.tessera`` (an empty or blank variable counts as unset), as an absolute path:
    a relative one is read from the working directory once, not again by each later caller in another folder. Its
    ``..`` parts are taken out where that names the same folder (``../home`` showed as ``/work/repo/../home`` in
    every path and message), and kept after a link, whose ``..`` is the link target's parent."""
    raw = os.environ.get("TESSERA_HOME", "")
    if not raw.strip():
        home = _user_home("TESSERA_HOME is " + ("blank" if raw else "unset")) / ".tessera"
    elif raw == "~" or raw.startswith("~/"):
        home = _user_home(f"TESSERA_HOME {short_repr(raw)} starts with ~") / raw[2:]
    else:
        try:
            home = Path(raw).expanduser()  # ~user/...
        except RuntimeError:
            raise SettingError(f"TESSERA_HOME {short_repr(raw)}: no such user's home folder; set TESSERA_HOME to "
                               "a folder") from None
    try:
        return _without_dot_dot(home.absolute())
    except OSError as err:  # the working directory was removed
        raise SettingError(f"TESSERA_HOME {short_repr(raw)} is relative and the working directory cannot be read "
                           f"({err.strerror or err}); set TESSERA_HOME to an absolute folder") from None


def _without_dot_dot(path: Path) -> Path:
    """``path`` with its ``.`` and ``..`` parts taken out, where the result is the same folder once links are
    followed (``os.path.normpath`` alone reads ``link/..`` as the folder holding the link)."""
    normal = Path(os.path.normpath(path))
    return normal if normal == path or normal.resolve() == path.resolve() else path


def _user_home(why: str) -> Path:
    """``$HOME``; when it is unset, the password database's entry, as ``~`` is read. An empty or relative one (a
    service's or ``env -i``'s environment) is refused: the default would be ``/.tessera`` or a folder in the working
    directory."""
    raw = os.environ.get("HOME")
    if raw is not None and not raw.strip():
        raise SettingError(f"{why} and HOME is empty: set TESSERA_HOME to Tessera's folder, or HOME to yours")
    try:
        home = Path.home()
    except RuntimeError:  # no HOME, no password entry
        raise SettingError(f"{why} and HOME is unset (nor has this user a home folder in the password database): "
                           "set TESSERA_HOME to Tessera's folder, or HOME to yours") from None
    if not home.is_absolute():
        raise SettingError(f"{why} and HOME {short_repr(str(home))} is not an absolute path: set TESSERA_HOME to "
                           "Tessera's folder, or HOME to yours")
    return home
