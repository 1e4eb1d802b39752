"""``tessera run --out FILE`` whose disk refuses the results (here a file size limit, ``RLIMIT_FSIZE`` 0, which fails
every write with EFBIG as a full disk fails it with ENOSPC): one line naming ``--out``, what the disk said and how full
it is, exit 2, and no file (nor a temporary one) left there. Before, the line was pyarrow's ``Error writing bytes to
file. Detail: [errno 27] File too large`` (Parquet, CSV) or ``File too large`` (JSON lines). A real run of a real
index in a real child process under a real resource limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process


def _no_file_may_grow() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


@pytest.mark.parametrize("name", ["results.parquet", "results.jsonl", "results.csv", "results.trec"])
def test_results_the_disk_refuses_are_said_in_one_line_and_leave_nothing(bm25_index, tmp_path, name):
    out = tmp_path / "out" / name
    out.parent.mkdir()
    done = subprocess.run([sys.executable, "-m", "flows", "run", "bm25", "--index", str(bm25_index), "--queries",
                           "classical music", "--no-cache", "--executor", "local", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, preexec_fn=_no_file_may_grow,
                          env={**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith(f"tessera: error: field '--out': cannot write --out {out}: a file would grow past this "
                           f"process's file size limit (`ulimit -f`) (the file system holding {out.parent}, "), said
    assert said.endswith(" free); nothing was written there: free space, or give --out on another disk, and run "
                         "again"), said
    assert list(out.parent.iterdir()) == []
