"""``tessera bench`` on a step cache it cannot write (a real read-only bind mount in a mount namespace of the test's
own, as root; skipped where this user may not make one): its report and ``bench.json`` say that nothing was stored
beside the share read from it. Before, they said ``(100% from the step cache)`` as for a cache that stored too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'

pytestmark = [pytest.mark.process, pytest.mark.data,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a mount namespace")]


def test_a_benchmark_on_a_read_only_step_cache_says_nothing_was_stored(scifact_slice, flow_specs, tmp_path):
    cache = tmp_path / "steps"
    cache.mkdir()
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "sh", "-c", READ_ONLY, str(cache), "true"],
                                                         capture_output=True).returncode != 0:
        pytest.skip("no read-only bind mount here")
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    env.pop("TESSERA_DEBUG", None)

    def bench(out: str, *mount: str) -> None:
        command = [*mount, sys.executable, "-m", "flows", "bench", "--dataset", str(scifact_slice), "--flow",
                   f"title={flow_specs['title']}", "--k", "1,10", "--no-mlflow", "--quiet", "--cache-dir", str(cache),
                   "--out", str(tmp_path / out)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
        assert done.returncode == 0, done.stderr

    bench("a")  # fills the step cache
    bench("b", "unshare", "-m", "sh", "-c", READ_ONLY, str(cache))
    flows = {out: json.loads((tmp_path / out / "bench.json").read_text())["flows"]["title"] for out in "ab"}
    assert [(f["step_cache_hits"], f["step_cache_nothing_stored"]) for f in flows.values()] == [
        (0.0, None), (1.0, "read-only")]
    assert "(100% from the step cache; nothing stored in the step cache (read-only))" in \
        (tmp_path / "b" / "report.md").read_text()
    assert "nothing stored" not in (tmp_path / "a" / "report.md").read_text()
