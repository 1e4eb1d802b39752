"""The ``tessera`` console script (and ``python -m flows``). Ctrl-C while the command's modules load (one to seven
seconds on two busy cores, before the command's own handlers are in place) printed the traceback of the import it
stopped; it is one line and status 130 then too, as ``docs/cli.md`` says of Ctrl-C."""

from __future__ import annotations

import sys

#: The status of a command stopped by Ctrl-C (128 + SIGINT), as the shell gives it.
INTERRUPTED = 130


def main() -> int:
    try:
        from flows.commands import main as command

        return command()
    except KeyboardInterrupt:
        print("tessera: interrupted", file=sys.stderr, flush=True)
        return INTERRUPTED
