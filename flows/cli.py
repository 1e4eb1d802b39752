"""The ``tessera`` console script (and ``python -m flows``). Ctrl-C while the command's modules load (one to seven
seconds on two busy cores, before the command's own handlers are in place) printed the traceback of the import it
stopped; it is one line and status 130 then too, as ``docs/cli.md`` says of Ctrl-C."""

from __future__ import annotations

import sys

#: The status of a command stopped by Ctrl-C (128 + SIGINT), as the shell gives it.
INTERRUPTED = 130


#: The exit status of a usage error (``flows.commands``' EXIT_USAGE), which a hidden package is: the user's setup.
USAGE = 2


def hidden_package() -> str | None:
    """The user's module that hides Tessera's ``operators`` package, found first on Python's path (the docs' plugin
    ``mylab/operators.py`` flattened to ``operators.py``, run with ``PYTHONPATH=.``): every command failed importing
    Tessera, with a traceback ending in ``'operators' is not a package``. Found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("operators")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.submodule_search_locations is not None or not spec.origin:
        return None
    return (f"{spec.origin} hides Tessera's own package 'operators' (PYTHONPATH or the working folder puts it first "
            "on Python's path): give your module a name of its own (mylab_operators.py, named in TESSERA_OPERATORS)")


def main() -> int:
    try:
        if problem := hidden_package():
            print(f"tessera: error: {problem}", file=sys.stderr, flush=True)
            return USAGE
        from flows.commands import main as command

        return command()
    except KeyboardInterrupt:
        print("tessera: interrupted", file=sys.stderr, flush=True)
        return INTERRUPTED
