"""Tessera's home folder: saved flows, the step cache, named indices, model exports."""

from __future__ import annotations

import os
from pathlib import Path


def tessera_home() -> Path:
    """``$TESSERA_HOME``, default ``~/.tessera`` (an empty variable counts as unset)."""
    return Path(os.environ.get("TESSERA_HOME") or Path.home() / ".tessera").expanduser()
