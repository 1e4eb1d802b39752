"""``tessera keys revoke`` when the task store's disk refuses the write (here a file size limit, ``RLIMIT_FSIZE`` 0,
which fails every write with EFBIG as a full disk fails it with ENOSPC; SQLite says ``disk I/O error``): one line
naming the store and saying nothing changed, exit 2, and the same command revokes once the disk takes writes. Before,
it was ``tessera: internal error: OperationalError: ... disk I/O error`` (exit 1) while the service held the store
open, and ``field '--config': the task store ... cannot be opened`` (blaming the config) when nothing did. A real
SQLite store made as the service makes it, a real child process under a real resource limit."""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from contextlib import closing, nullcontext
from pathlib import Path

import pytest

from operators.api_keys import key_hash
from tests.flows.test_keys_revoke import ALICE, rows, write_config

pytestmark = [pytest.mark.process, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _no_file_may_grow() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


@pytest.mark.parametrize("held", [True, False], ids=["service-holds-the-store", "store-closed"])
def test_a_revocation_the_disk_refuses_says_so_and_changes_nothing(tmp_path, held):
    config, url = write_config(tmp_path)
    command = [sys.executable, "-m", "flows", "keys", "revoke", "--id", "alice", "--config", config]
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    service = closing(sqlite3.connect(tmp_path / "tasks.db")) if held else nullcontext()
    with service as conn:  # a running service keeps the store open: its -shm file is there for the command to use
        if conn is not None:
            conn.execute("SELECT count(*) FROM tasks").fetchall()
        refused = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
                                 preexec_fn=_no_file_may_grow)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == (
        f"tessera: error: the task store {url} could not be written (OperationalError: disk I/O error): its disk is "
        "full, or at a quota or file size limit; nothing was changed: free space there, then run the command again")
    assert rows(url) == []
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert [row["sha256"] for row in rows(url)] == [key_hash(ALICE)]
