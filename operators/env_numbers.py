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


def env_count(name: str, default: int | None, *, environ: Mapping[str, str] | None = None) -> int | None:
    """``$name`` as a whole number, 1 or more, else ``default``."""
    raw = _raw(name, environ)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SettingError(f"{name} must be a whole number, 1 or more (got {short_repr(raw)})")
    return value


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    return raw or None
