"""``python -m flows.bench``: ``tessera bench`` as a job entry point (see ``flows.commands.bench``)."""

import sys

from flows.commands.bench import main

if __name__ == "__main__":
    sys.exit(main())
