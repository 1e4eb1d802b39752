"""Numbers that environment variables set (timeouts, grace periods, thread counts), read where they are used.

A value that is no such number is an error naming the variable (``SettingError``): not Python's bare "could not
convert string to float" from deep inside a run, and not a default taken in silence. An empty variable counts as
unset, as ``$TESSERA_HOME`` does.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from operators.errors import SettingError, short_repr


def env_seconds(name: str, default: float, *, zero: bool = True, environ: Mapping[str, str] | None = None) -> float:
    """``$name`` as seconds (a fraction is fine), else ``default``; ``zero=False`` for a timeout, where 0 would
    give up before anything could answer."""
    raw = _raw(name, environ)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        least = "0 or more" if zero else "more than 0"
        raise SettingError(f"{name} must be a number of seconds, {least} (got {short_repr(raw)})")
    return value


def env_count(name: str, default: int | None, *, most: int | None = None,
              environ: Mapping[str, str] | None = None) -> int | None:
    """``$name`` as a whole number, 1 or more, else ``default``. ``most``: the largest the reader can take, so that
    a typo (``99999999`` threads) is refused here rather than crashing the library it is handed to."""
    raw = _raw(name, environ)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SettingError(f"{name} must be a whole number, 1 or more (got {short_repr(raw)})")
    if most is not None and value > most:
        raise SettingError(f"{name} must be at most {most} (got {short_repr(raw)})")
    return value


def env_columns(default: int = 120, *, least: int = 20, environ: Mapping[str, str] | None = None) -> int:
    """The width of tables written off a terminal: ``$COLUMNS`` read as ``shutil.get_terminal_size`` reads it, a
    value that is no whole number above 0 ignored (``default``) rather than refused, since shells set it for their
    own use; at least ``least``, below which a table has no room for its text (rich then printed nothing)."""
    try:
        value = int((os.environ if environ is None else environ).get("COLUMNS", ""))
    except ValueError:
        return default
    return default if value < 1 else max(value, least)


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    return raw or None
