"""``python -m flows``: the ``tessera`` command, for when its console script is not on ``PATH``."""

import sys

from flows.cli import main

if __name__ == "__main__":
    sys.exit(main())
