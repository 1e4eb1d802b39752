"""What the service writes is its tenants' data, readable by the user running it only (files 0600, folders 0700).

Why a process-wide umask rather than modes at each write: the service's files are written by its own code (uploads,
``owner.json``, saved flows) and by code it shares with the CLI (``flows.ingestion``, ``operators.store`` write the
indices), where ``tessera ingest`` must keep the usual umask. The service's writes all happen in processes that run
nothing else: the ingress replica (``serve.service.Service``) and the task workers
(``serve.tasks.taskrunner.TaskWorker``), each a Ray actor process of its own. Setting the umask once when each starts
covers every write there, from every thread (a umask switched around single writes would race with the replica's other
threads).

The task store's SQLite file is the exception: the app's build and ``tessera serve``'s start check open it in
processes with the usual umask, so ``private_sqlite`` makes the file (and its ``-wal``/``-shm``, which SQLite creates
with the file's mode) private where the store is opened.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("tessera.serve")

#: The umask of the service's processes: nothing for the group or others.
PRIVATE_UMASK = 0o077
#: What SQLite keeps beside a database in WAL mode.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def keep_private() -> None:
    """From now on, what this process makes is its user's only (files 0600, folders 0700), whatever umask it had.
    Called first thing in the service's processes; never in the CLI's."""
    os.umask(PRIVATE_UMASK)


def private_sqlite(database: str | Path) -> None:
    """Make the SQLite file ``database`` (its folder if missing, 0700) and take the group's and others' access
    from it and its side files: a file made before (by ``tessera serve``'s start check, or an older service) is made
    private too. A file of another user, whose mode this user cannot change, is left as it is, with a warning."""
    path = Path(database)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:  # an empty file is an empty database to SQLite
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass
    for file in (path, *(path.with_name(path.name + side) for side in SQLITE_SIDE_FILES)):
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
            if mode & 0o077:
                file.chmod(mode & 0o700)
        except FileNotFoundError:
            continue
        except OSError as err:
            log.warning("task store: %s may stay readable by other users: %s", file, err.strerror or err)
