"""What ``TESSERA_OPERATORS`` takes when it was given something else (``operators/plugin_names.py``): the file, an
entry point's ``module:Class``, a class's dotted path, a package whose operators are in its submodules, a misspelt
submodule, or the right name from the folder that holds the package, which the ``tessera`` script does not import
from. Each was a bare ``ModuleNotFoundError`` (or a relative-import ``TypeError``). The plugin is the real package of
``test_plugins``, written into ``tmp_path``; the working-folder case runs the installed ``tessera`` script."""

from __future__ import annotations

import os

import pytest

from operators.plugins import OperatorPluginError
from operators.registry import all_operators
from tests.flows.test_cli import tessera_process
from tests.operators.test_plugins import PACKAGE, fresh_registry, plugin_root  # noqa: F401 - fixtures

FLAGS = f"{PACKAGE}.flags"


@pytest.fixture
def root(plugin_root):  # noqa: F811 - the imported fixture
    """The folder that holds the plugin package (importable, not registered)."""
    return plugin_root


@pytest.mark.parametrize("named, said", [
    (f"{PACKAGE}/flags.py", f"; it takes module names, not files: name '{FLAGS}', with PYTHONPATH=. so that Python "
                            "finds it"),
    (f"./{PACKAGE}/flags.py", f"; it takes module names, not files: name '{FLAGS}', with PYTHONPATH=. so that "
                              "Python finds it"),
    (f"{FLAGS}:KeywordFlagger", f"; it takes module names, not module:Class: name '{FLAGS}' (each named operator it "
                                "defines is registered); an entry point may name one class"),
    (f"{FLAGS}.KeywordFlagger", f"; KeywordFlagger is a class: name its module, '{FLAGS}' (each named operator it "
                                "defines is registered)"),
    (PACKAGE, f"; its submodules are not imported for you: name them ('{FLAGS}') or import their operators in "
              f"{PACKAGE}'s __init__.py"),
    (f"{PACKAGE}.flag", f"; did you mean '{FLAGS}'?"),
    ("no_such_lab.flags", "; put the folder that holds 'no_such_lab' on PYTHONPATH, or install its package in "),
], ids=["file", "./file", "module:Class", "class path", "package", "misspelt", "nowhere"])
def test_what_tessera_operators_was_given_in_place_of_a_module_says_what_to_write(root, monkeypatch, named, said):
    monkeypatch.chdir(root)
    monkeypatch.setenv("TESSERA_OPERATORS", named)
    with pytest.raises(OperatorPluginError) as err:
        all_operators()
    assert said in err.value.message, err.value.message
    assert err.value.message.startswith(f"operator plugin TESSERA_OPERATORS module '{named}'")


def test_a_file_path_outside_the_working_folder_names_the_folder_for_pythonpath(root, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_OPERATORS", str(root / PACKAGE / "flags.py"))
    with pytest.raises(OperatorPluginError) as err:
        all_operators()
    assert err.value.message.endswith(f"; it takes module names, not files: name '{FLAGS}', with "
                                      f"PYTHONPATH={root} so that Python finds it")


@pytest.mark.process
def test_the_tessera_script_run_beside_the_package_says_to_set_pythonpath(root, monkeypatch, tmp_path):
    """``python -m flows`` imports from the working folder; the installed script does not."""
    monkeypatch.setenv("TESSERA_OPERATORS", FLAGS)
    done = tessera_process("ops", "mylab.keyword_flag", home=tmp_path / "home", cwd=root, check=2)
    assert (f"No module named '{PACKAGE}'; '{PACKAGE}' is in the working folder, which the tessera command does not "
            "import from: run it with PYTHONPATH=. (or install the package)") in done.stderr
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([".", os.environ.get("PYTHONPATH", "")]))
    assert "mylab.keyword_flag" in tessera_process("ops", "mylab.keyword_flag", home=tmp_path / "home",
                                                   cwd=root).stdout


def test_a_plugin_module_named_as_tesseras_own_package_is_refused_naming_the_file(isolated_registry, monkeypatch,
                                                                                 tmp_path):
    """The docs' mylab/operators.py flattened to operators.py: Python imports Tessera's operators package, which was
    said to define no operator (and to have submodules to name)."""
    from tests.operators.test_plugins import FLAGS as SOURCE

    (tmp_path / "operators.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TESSERA_OPERATORS", "operators")
    with pytest.raises(OperatorPluginError) as err:
        all_operators()
    assert err.value.message == (f"operator plugin TESSERA_OPERATORS module 'operators': 'operators' is Tessera's own "
                                 f"package, so Python imports Tessera's and not your module ({tmp_path.resolve()}/"
                                 "operators.py): give your module a name of its own (mylab_operators.py, named "
                                 "TESSERA_OPERATORS=mylab_operators)")
