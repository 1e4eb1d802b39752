"""``python -m flows.bench``: ``tessera bench`` as a job entry point (see ``flows.bench.cli``)."""

import sys

from flows.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
