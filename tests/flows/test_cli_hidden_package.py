"""A user's module named as one of Tessera's packages, first on Python's path (``flows/cli.py``): the docs' plugin
``mylab/operators.py`` flattened to ``operators.py`` and run with ``PYTHONPATH=.`` as operators.md shows. Every
command failed importing Tessera itself, a traceback ending in ``'operators' is not a package``; it is one line
naming the file. The installed ``tessera`` script in a process of its own, in a real folder."""

from __future__ import annotations

import os

import pytest

from tests.flows.test_cli import tessera_process
from tests.operators.test_plugins import FLAGS


@pytest.mark.process
def test_a_module_that_hides_tesseras_operators_package_is_one_line_naming_it(tmp_path, monkeypatch):
    name = "operators"
    (tmp_path / f"{name}.py").write_text(FLAGS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([".", os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("TESSERA_OPERATORS", name)
    done = tessera_process("ops", home=tmp_path / "home", cwd=tmp_path, check=2)
    assert done.stderr == (f"tessera: error: {tmp_path / name}.py hides Tessera's own package '{name}' (PYTHONPATH or "
                           "the working folder puts it first on Python's path): give your module a name of its own "
                           f"(mylab_{name}.py, named in TESSERA_OPERATORS)\n")


@pytest.mark.process
def test_the_same_folder_with_the_module_renamed_runs(tmp_path, monkeypatch):
    (tmp_path / "mylab_operators.py").write_text(FLAGS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([".", os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("TESSERA_OPERATORS", "mylab_operators")
    assert "mylab.keyword_flag" in tessera_process("ops", "mylab.keyword_flag", home=tmp_path / "home",
                                                   cwd=tmp_path).stdout
