"""Whether a shard's staged files (``_ingest/<key>/<shard>.parquet`` and its ``.failures.json``) can be read.

Staging writes them atomically, but a disk that failed, a file system restored from a backup, or a hand that cut a
file short leaves one that cannot be read, and the resume that reused it stopped with ``internal error: ArrowInvalid:
... Parquet magic bytes not found``, every run again, until the file was found and deleted by hand. A staged file is
the source's documents again, so a damaged one is not reused: the source is staged again (``Stager.stage``), which
writes it anew, and a warning names it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger("tessera.ingest")


def staged_whole(docs: Path, failures: Path) -> bool:
    """Whether ``docs`` is there and both files read (the Parquet footer, the failures' JSON); a damaged one is
    named in a warning."""
    if not docs.exists():
        return False
    try:
        pq.read_metadata(docs)
        if failures.exists():
            json.loads(failures.read_text(encoding="utf-8"))
    except (OSError, ValueError, pa.ArrowException) as err:
        log.warning("%s: a staged shard that cannot be read (%s): the source is staged again", docs,
                    str(err).splitlines()[0] if str(err) else type(err).__name__)
        return False
    return True
