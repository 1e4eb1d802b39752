"""``tessera serve`` on a task store whose disk refuses writes (here a file size limit, ``RLIMIT_FSIZE`` 0, in a
child process: SQLite cannot make the store's ``-shm`` file, as on a full disk). The start check and the app's
build said the store "cannot be opened: disk I/O error", which read as a broken store or URL; they now say the disk
refused a write and to free space. A real SQLite store made beforehand, a real ``tessera serve`` process."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.flows.test_serve_start_checks import tessera_serve

pytestmark = [pytest.mark.process, pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")]

REPO = Path(__file__).resolve().parents[2]
REFUSED = "cannot be opened: its disk refused a write (the disk is full, or at a quota or file size limit; " \
          "OperationalError: disk I/O error): free space there"


def _no_file_may_grow() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # every write of a byte: EFBIG


def _made_store(tmp_path: Path) -> str:
    """A task store made (and closed: no -shm left) while the disk takes writes."""
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    made = subprocess.run([sys.executable, "-c", "import sys; from serve.tasks.taskstore import TaskStore; "
                           "TaskStore(sys.argv[1]).engine.dispose()", url], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert made.returncode == 0 and not (tmp_path / "tasks.db-shm").exists(), made.stderr
    return url


def test_the_start_check_says_the_disk_refused_the_task_store(tmp_path):
    url = _made_store(tmp_path)
    config = {"http_options": {"host": "127.0.0.1", "port": 1},
              "applications": [{"name": "tessera", "route_prefix": "/", "import_path": "serve.app:build_app",
                                "args": {"models": [], "service": {"default_index": None, "task_store": url}}}]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    done = tessera_serve("--config", str(tmp_path / "config.yaml"), tmp_path=tmp_path, preexec_fn=_no_file_may_grow)
    err = done.stderr
    assert done.returncode == 2, err
    assert err.strip().splitlines() == [
        f"tessera: error: field 'args.service.task_store': the task store {tmp_path / 'tasks.db'} {REFUSED}, then run "
        "the command again"], err


def test_the_apps_build_says_the_disk_refused_the_task_store(tmp_path):
    url = _made_store(tmp_path)
    script = ("import sys\nfrom serve.app import check_task_store\nfrom operators.errors import TesseraError\n"
              "try:\n    check_task_store(sys.argv[1], given=True)\nexcept TesseraError as err:\n    print(err)\n")
    done = subprocess.run([sys.executable, "-c", script, url], cwd=REPO, capture_output=True, text=True, timeout=120,
                          preexec_fn=_no_file_may_grow)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"field 'args.service.task_store': the task store {url} {REFUSED}; fix it and "
                                   "deploy again"), done.stdout
