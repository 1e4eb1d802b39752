"""``tessera bench``: benchmark flows on a BEIR-layout dataset (see ``flows.bench``)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from flows.bench.cli import DESCRIPTION, EPILOG, add_arguments, handle

    parser = subparsers.add_parser("bench", parents=[common], help="benchmark flows on a BEIR-layout dataset",
                                   description=DESCRIPTION, epilog=EPILOG)
    add_arguments(parser)
    parser.set_defaults(handler=handle)
