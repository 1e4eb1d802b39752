"""What every ``tessera`` subcommand shares: exit codes, the CLI error, console output, loading a flow."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from operators.errors import TesseraError


def escape(text: str) -> str:
    """Escape rich markup in data (titles, descriptions, values) before printing it."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 130


class CliError(TesseraError):
    """A bad command-line argument or file."""


def require_extra(extra: str, modules: tuple[str, ...]) -> None:
    """Fail with the install line when a command's optional dependencies are missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(f"this command needs the '{extra}' extra (missing: {', '.join(missing)}): "
                       f"pip install 'tessera[{extra}]' (from a clone: pip install -e '.[{extra}]')", field=extra)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def show_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


def console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", 0) or 120)
    return Console(file=stream, width=width, highlight=False, soft_wrap=False, emoji=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def load_flow(source: str, *, index: str | None = None):
    """Build a flow from a path/name/text; a mosaicRAG request also yields its query.

    ``index`` fills the ``index`` param of every retrieval step that leaves it unset."""
    from flows.spec import load_request

    spec, query = load_request(source)
    if index is not None:
        spec = spec.with_index(index)
    return spec.build(), query
