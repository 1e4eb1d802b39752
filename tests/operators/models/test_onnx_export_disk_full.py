"""The query encoder's ONNX export on a disk that refuses its file (full, over quota, ``ulimit -f``; here
``RLIMIT_FSIZE`` 0 in a child process, which the export's own child inherits): the export fails, the queries go on
through torch, and nothing is left in ``$TESSERA_HOME/models``. Before, an empty export folder and its lock file
stayed there for good. The packaged MiniLM and the real exporter."""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import subprocess
import sys

import pytest

from operators.models.onnx_query_encoder import ENV

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("onnx", "onnxruntime", "onnxscript", "torch")),
    reason="the ONNX export needs torch and the ONNX libraries")]

SCRIPT = ("import json, sys\n"
          "from operators.models.onnx_query_encoder import export_query_encoder\n"
          "made = export_query_encoder(sys.argv[1], wait=True)\n"
          "print(json.dumps({'file': made and str(made)}))\n")


def _no_file_may_grow() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # every write of a byte: EFBIG


def test_an_export_the_disk_refuses_leaves_no_folder_and_no_lock(tmp_path):
    env = {**os.environ, "TESSERA_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    env.pop(ENV, None)
    done = subprocess.run([sys.executable, "-c", SCRIPT, "all-MiniLM-L6-v2"], capture_output=True, text=True,
                          timeout=300, env=env, preexec_fn=_no_file_may_grow)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"file": None}
    assert "could not export 'all-MiniLM-L6-v2' to ONNX for the query fast path" in done.stderr, done.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [], "the failed export left files behind"
    again = subprocess.run([sys.executable, "-c", SCRIPT, "all-MiniLM-L6-v2"], capture_output=True, text=True,
                           timeout=300, env=env)  # room again: the export is made
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["file"].endswith("model.onnx")
