"""``python -m flows.run FLOW --queries FILE_OR_TEXT ...``: ``tessera run`` as a job entry point.

The same options as ``tessera run`` (see ``flows.cli``), but the Ray executor is the
default, because this is what a cluster job runs::

    ray job submit --working-dir . -- python -m flows.run demo \\
        --queries data/sample/queries.jsonl --out results.parquet

``--executor local`` runs in-process instead.
"""

from __future__ import annotations

import sys
from typing import Sequence

from flows.cli import run_main


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(argv, prog="python -m flows.run", default_executor="ray")


if __name__ == "__main__":
    sys.exit(main())
