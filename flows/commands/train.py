"""``tessera train``: fine-tune rerankers and the dense retriever on a training split (see ``flows.train``)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from flows.train.cli import DESCRIPTION, EPILOG, add_arguments, handle

    parser = subparsers.add_parser("train", parents=[common], help="train rerankers / the dense retriever on a "
                                   "dataset's training split", description=DESCRIPTION, epilog=EPILOG)
    add_arguments(parser)
    parser.set_defaults(handler=handle)
