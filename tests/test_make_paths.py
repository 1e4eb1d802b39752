"""``make demo PYTHON=/path/to/python3.11``, as the README says, with a path that holds a space (a macOS home such as
``/Users/Zoë Smith/.pyenv/...``): make ran ``/Users/Zoë`` and stopped, ``No such file or directory``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.process
@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_venv_takes_a_python_whose_path_holds_a_space(tmp_path):
    folder = tmp_path / "Zoë Smith" / "bin"
    folder.mkdir(parents=True)
    python = folder / "python3.11"
    python.symlink_to(os.path.realpath(sys.executable))
    # VENV relative, as make demo's .venv is: make cannot name a target whose path holds a space (tmp_path may)
    done = subprocess.run(["make", "-f", str(ROOT / "Makefile"), "venv", f"PYTHON={python}", "VENV=venv"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "venv" / "bin" / "python").exists()
