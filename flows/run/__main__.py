"""``python -m flows.run``: ``tessera run`` as a job entry point, Ray executor by default."""

import sys

from flows.commands.run import main

if __name__ == "__main__":
    sys.exit(main())
