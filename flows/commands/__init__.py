"""Subcommands of ``tessera`` beyond run/ops/flows/cache, one module each.

Every module here defines ``register(subparsers, common)``, which adds its
subcommand (``parser.set_defaults(handler=...)``; the handler takes the parsed
arguments and returns an exit status). ``flows.cli`` discovers the modules, so a
new command is one new file. Errors are raised as ``TesseraError`` (one line on
stderr, exit status 2), as everywhere in the CLI.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil


def register_all(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    import flows.commands as package

    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not module.name.startswith("_"):
            importlib.import_module(f"flows.commands.{module.name}").register(subparsers, common)
