"""``tessera chat`` whose step cache the disk refuses at its first question writes it again for a later question once
space came back, as ``Flow.run`` asks again each run; the refusal is said once. Before, the chat kept the one answer
for all its questions: nothing was stored until it ended. A real full disk (a tmpfs of 256 KiB in a mount namespace of
the test's own, as root; skipped where this user may not make one) filled by a file removed in that namespace
(``nsenter``) after the first answer; the model is the local fault server, the retrieval real (BM25 over the bundled
sample), the chat a process of its own, a question at a time on its stdin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.test_chat_command import SPEC

pytestmark = [pytest.mark.process, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a tmpfs mount")]

REPO = Path(__file__).resolve().parents[2]
FULL_DISK = 'mount -t tmpfs -o size=256k tmpfs "$0" && { cat /dev/zero > "$0/filler" 2>/dev/null; exec "$@"; }'
UNITS = ("import sqlite3, sys; print(sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True)"
         ".execute('SELECT count(*) FROM units').fetchone()[0])")


def test_a_question_after_a_refused_write_stores_its_steps_once_space_came_back(fault_models, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if not (shutil.which("unshare") and shutil.which("nsenter")) or subprocess.run(
            ["unshare", "-m", "sh", "-c", FULL_DISK, str(disk), "true"], capture_output=True).returncode != 0:
        pytest.skip("no tmpfs mount here")
    spec = tmp_path / "small_rag.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    cache = disk / "cache"
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    env.pop("TESSERA_DEBUG", None)
    chat = subprocess.Popen(["unshare", "-m", "sh", "-c", FULL_DISK, str(disk), sys.executable, "-m", "flows", "chat",
                             str(spec), "--model", "fault-ok", "--json", "--cache-dir", str(cache)], cwd=REPO, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ask(question: str) -> dict:
        chat.stdin.write(question + "\n")
        chat.stdin.flush()
        return json.loads(chat.stdout.readline())

    def in_its_namespace(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["nsenter", "-t", str(chat.pid), "-m", *command], capture_output=True, text=True,
                              timeout=60, env=env)

    try:
        assert ask("Which insects make honey?")["answer"]
        assert in_its_namespace("test", "-f", str(cache / "index.sqlite")).returncode != 0  # nothing stored
        assert in_its_namespace("rm", str(disk / "filler")).returncode == 0  # space comes back
        assert ask("What do bees eat?")["answer"]
        stored = in_its_namespace(sys.executable, "-c", UNITS, str(cache / "index.sqlite"))
        assert stored.returncode == 0 and int(stored.stdout) > 0, stored.stderr  # was: no database, nothing stored
    finally:
        chat.stdin.close()
        chat.wait(timeout=120)
        stderr = chat.stderr.read()
    assert chat.returncode == 0, stderr
    assert stderr.count(f"the step cache {cache} cannot be written (") == 1, stderr
