"""A trained model that the disk refuses to save (here a file size limit, ``RLIMIT_FSIZE``, which fails writes with
EFBIG as a full disk fails them with ENOSPC) is one line naming the model's folder, the file system and what to do,
and the checkpoint the folder held stays as it was. Before, ``tessera train --model static`` on a full disk ended,
after minutes of distilling, with ``tessera: internal error: SafetensorError: Error while serializing: I/O error: No
space left on device (os error 28)``, no folder named. ``write_checkpoint`` (every kind's save) with real
safetensors and plain writes in a real child process under a real resource limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, resource, sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from flows.train.checkpoints import write_checkpoint
from flows.train.errors import TrainError

folder, how = Path(sys.argv[1]), sys.argv[2]


def save(tmp):
    tmp.mkdir(parents=True)
    weights = np.ones(1 << 18, np.float32)  # 1 MiB, over the limit below
    if how == "safetensors":
        save_file({"w": weights}, str(tmp / "model.safetensors"))
    else:
        (tmp / "model.bin").write_bytes(weights.tobytes())
    return {}


resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
try:
    write_checkpoint(folder, save, {"config_key": "b" * 64})
    print(json.dumps({"error": None}))
except TrainError as err:
    print(json.dumps({"error": err.message, "field": err.field}))
"""


@pytest.mark.parametrize("how", ["safetensors", "plain"])
def test_a_model_the_disk_refuses_to_save_is_named_and_the_old_one_kept(tmp_path, how):
    folder = tmp_path / "models" / "tessera-cross-encoder"
    folder.mkdir(parents=True)
    (folder / "training.json").write_text(json.dumps({"config_key": "a" * 64}))
    (folder / "model.safetensors").write_bytes(b"old weights")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(folder), how], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    assert said is not None and said.startswith(
        f"cannot save the trained model to {folder}: a file would grow past this process's file size limit "
        f"(`ulimit -f`) (the file system holding {folder.parent}, "), said
    assert said.endswith(f" free); nothing was saved, and what {folder} held before is unchanged: free space there "
                         "(or set TESSERA_HOME to another disk), then run the command again"), said
    assert sorted(p.name for p in folder.parent.iterdir()) == ["tessera-cross-encoder"]  # no half-saved sibling
    assert (folder / "model.safetensors").read_bytes() == b"old weights"
    assert json.loads((folder / "training.json").read_text()) == {"config_key": "a" * 64}
