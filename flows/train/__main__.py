"""``python -m flows.train``: ``tessera train`` as a job entry point (see ``flows.commands.train``).

::

    ray job submit --runtime-env cluster/runtime_env.yaml -- python -m flows.train --dataset /data/scifact --model all
"""

import sys

from flows.commands.train import main

if __name__ == "__main__":
    sys.exit(main())
