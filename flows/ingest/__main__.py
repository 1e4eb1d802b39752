"""``python -m flows.ingest``: ``tessera ingest`` as a job entry point, Ray executor by default.

::

    ray job submit --runtime-env cluster/runtime_env.yaml -- \
        python -m flows.ingest --source corpus.jsonl --index /shared/idx
"""

import sys

from flows.commands.ingest import main

if __name__ == "__main__":
    sys.exit(main())
