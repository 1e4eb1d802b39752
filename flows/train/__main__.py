"""``python -m flows.train``: ``tessera train`` as a job entry point (see ``flows.train.cli``).

::

    ray job submit --working-dir . -- python -m flows.train --dataset /data/scifact --model all
"""

import sys

from flows.train.cli import main

if __name__ == "__main__":
    sys.exit(main())
