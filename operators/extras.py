"""The optional packages an operator needs, checked before a flow or an ingestion runs.

An operator that imports a package of an extra (``analyze.dimensions``: dateparser, ``[dimensions]``) declares it
as ``requires_packages = {module: extra}``. Without the package, such a step failed each document at its setup, so an
ingestion exited 0 with every document in the failure ledger and the reason only there; ``missing_extra`` says it
before anything is read.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import Any

from operators.errors import TesseraError


class MissingExtraError(TesseraError):
    """A step's optional package is not installed where the flow or ingestion would run; nothing was run."""


def check_extras(op: Any, step: str | None = None, field: str = "op") -> None:
    """``MissingExtraError`` naming ``op``'s step when ``missing_extra`` finds what it lacks."""
    if (why := missing_extra(op)) is not None:
        raise MissingExtraError(why, op=op.name, step=step, field=field)


def missing_extra(op: Any) -> str | None:
    """What ``op`` (an operator or its class) lacks of its ``requires_packages``, as the line that says what to
    install, or None when everything is there."""
    needs: dict[str, str] = getattr(op, "requires_packages", None) or {}
    missing = [module for module in needs if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    extras = ",".join(sorted({needs[module] for module in missing}))
    top = (op if isinstance(op, type) else type(op)).__module__.partition(".")[0]
    if top in ("operators", "flows", "serve"):
        install = f"pip install 'tessera[{extras}]' (from a clone: pip install -e '.[{extras}]')"
    elif distributions := metadata.packages_distributions().get(top):  # a plugin's own extras
        install = f"pip install '{distributions[0]}[{extras}]'"
    else:  # a TESSERA_OPERATORS module, from no distribution
        install = f"install the package(s) that provide {', '.join(missing)} (its extra '{extras}')"
    return f"{op.name} needs {', '.join(missing)}, not installed here: {install}"
