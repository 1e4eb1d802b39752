"""The step cache key covers the code that computes a step: a real flow run in-process with a real cache, its
operator's module file, or a helper module that file imports, rewritten between runs (as an edit in an editable
install, or of a plugin, is), misses the entries the old code stored; an operator whose files are untouched still
hits."""

from __future__ import annotations

import importlib.util
import logging
import sys

import pytest

from flows.cache_code import class_code, code_identity, tessera_version
from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators import create, registry
from operators.analyze.word_count import WordCounter
from operators.testing import sample_results

STAMP_SOURCE = '''\
"""A test operator whose file the test rewrites."""

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from operators.base import Operator
from operators.tables import set_column


class Stamp(Operator):
    """Writes the stamp its code holds on every row."""

    name = "test.code_stamp"
    scope = "row"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def reads(self) -> list[str]:
        return ["text"]

    def produces(self) -> dict[str, str]:
        return {"stamp": "data"}

    def transform(self, table: pa.Table) -> pa.Table:
        return set_column(table, "stamp", pa.array([STAMP] * table.num_rows))
'''

FLOW = FlowSpec.parse({"name": "coded", "steps": {"words": {"op": "analyze.word_count"},
                                                 "stamp": {"op": "test.code_stamp"}}})


def hits_and_stamps(cache, results) -> tuple[dict[str, float | None], set[str]]:
    """``FLOW`` run on ``results`` with ``cache``: each step's hit ratio, and the stamps its rows got."""
    result = LocalExecutor(cache=cache).run(FLOW, results)
    return ({step: record.hit_ratio for step, record in result.steps.items()},
            set(result.table.column("stamp").to_pylist()))


def load_stamp(path, module_name, monkeypatch):
    """Import (again) the module at ``path`` under ``module_name`` and register its operator, as a notebook's
    reload or a new process does after an edit."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, module_name, module)
    spec.loader.exec_module(module)
    registry.all_operators()
    monkeypatch.setitem(registry._registry, module.Stamp.name, module.Stamp)
    return module.Stamp


# "operators._stamp_probe": a module of Tessera's own operators package, as a built-in edited in an editable install
# (its version unchanged); "tessera_stamp_probe": a plugin's module, outside Tessera's packages
@pytest.mark.parametrize("module_name", ["operators._stamp_probe", "tessera_stamp_probe"])
def test_an_edited_operators_steps_recompute_and_an_untouched_one_still_hits(module_name, cache, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # each load compiles the file as it is now
    path = tmp_path / "stamp_probe.py"
    path.write_text(STAMP_SOURCE.replace("[STAMP]", "['old']"))
    results = sample_results(2, 4)

    def run() -> tuple[dict[str, float | None], set[str]]:
        return hits_and_stamps(cache, results)

    load_stamp(path, module_name, monkeypatch)
    assert run() == ({"words": 0.0, "stamp": 0.0}, {"old"})
    load_stamp(path, module_name, monkeypatch)  # the same code loaded again: every step hits
    assert run() == ({"words": 1.0, "stamp": 1.0}, {"old"})

    path.write_text(STAMP_SOURCE.replace("[STAMP]", "['fixed']"))
    edited = load_stamp(path, module_name, monkeypatch)
    assert run() == ({"words": 1.0, "stamp": 0.0}, {"fixed"})  # the edited step recomputes, words still hits
    # its own file, its base's, and the Tessera modules those import (operators.tables), named as imported
    assert {module_name, "operators.base", "operators.tables"} <= dict(class_code(edited)).keys()


HELPER_SOURCE = '''\
"""A helper module of the test operator below, which the test rewrites."""

STAMP = "old"
'''

STAMPED_SOURCE = '''\
"""A test operator that takes its stamp from a helper module{lazily}."""

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from operators.base import Operator
from operators.tables import set_column
{top}

class Stamp(Operator):
    """Writes the stamp its helper holds on every row."""

    name = "test.code_stamp"
    scope = "row"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def reads(self) -> list[str]:
        return ["text"]

    def produces(self) -> dict[str, str]:
        return {{"stamp": "data"}}

    def transform(self, table: pa.Table) -> pa.Table:
        {inside}
        return set_column(table, "stamp", pa.array([helper.STAMP] * table.num_rows))
'''

HELPER = "operators._stamp_helper_probe"
IMPORT = "from operators import _stamp_helper_probe as helper"


def load_module(path, module_name, monkeypatch):
    """Import (again) the module at ``path`` under ``module_name``, as a new process does after an edit."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, module_name, module)
    spec.loader.exec_module(module)
    return module


# the helper imported at the top of the operator's module, or inside transform (as a setup() imports what it needs)
@pytest.mark.parametrize("lazily", [False, True])
def test_an_edited_helper_module_misses_its_operators_steps_and_no_others(lazily, cache, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # each load compiles the file as it is now
    helper_path, operator_path = tmp_path / "stamp_helper_probe.py", tmp_path / "stamped_probe.py"
    helper_path.write_text(HELPER_SOURCE)
    operator_path.write_text(STAMPED_SOURCE.format(lazily=" lazily" if lazily else "", top="" if lazily else IMPORT,
                                                   inside=IMPORT if lazily else "pass"))
    results = sample_results(2, 4)

    def run() -> tuple[dict[str, float | None], set[str]]:
        return hits_and_stamps(cache, results)

    def load() -> type:  # a new process: the helper and the operator's module imported again
        load_module(helper_path, HELPER, monkeypatch)
        registry.all_operators()
        stamp = load_module(operator_path, "operators._stamped_probe", monkeypatch).Stamp
        monkeypatch.setitem(registry._registry, stamp.name, stamp)
        return stamp

    load()
    assert run() == ({"words": 0.0, "stamp": 0.0}, {"old"})
    assert HELPER in dict(class_code(load()))  # the same code loaded again: every step hits
    assert run() == ({"words": 1.0, "stamp": 1.0}, {"old"})

    helper_path.write_text(HELPER_SOURCE.replace('"old"', '"fixed"'))  # only the helper is edited
    load()
    assert run() == ({"words": 1.0, "stamp": 0.0}, {"fixed"})  # its operator's step recomputes, words still hits


def test_the_code_in_a_key_is_the_tessera_version_and_the_classes_modules_by_name():
    code = code_identity(create("analyze.word_count", {}))
    assert code["tessera"] == tessera_version() != "unknown"
    # its own module and its base class's, named as imported (no path: another install computes the same key)
    # and the Tessera modules those import, transitively (operators.base imports operators.tables, which imports
    # operators.errors; from operators import params names operators.params, not the package's __init__)
    assert code["modules"][:2] == ["operators.analyze.word_count", "operators.base"]
    assert {"operators.tables", "operators.errors", "operators.params"} <= set(code["modules"])
    assert "operators" not in code["modules"] and not any(module.startswith(("pyarrow", "pydantic"))
                                                          for module in code["modules"])
    rrf = code_identity(create("fuse.rrf", {"branches": ["a", "b"]}))
    assert "operators.analyze.word_count" not in rrf["modules"] and rrf["source"] != code["source"]
    # a helper an operator imports (sources.jsonl reads through operators/sources/_documents.py)
    assert "operators.sources._documents" in code_identity(create("sources.jsonl", {"path": "x.jsonl"}))["modules"]


def test_a_placed_steps_proxy_keys_the_code_of_the_operator_it_stands_for():
    from flows.placement import ServedEmbedder, proxy_class
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder

    proxy = proxy_class(SentenceTransformerEmbedder, ServedEmbedder)
    assert class_code(proxy) == class_code(SentenceTransformerEmbedder)
    assert "flows.placement" not in dict(class_code(proxy)) and class_code(WordCounter) != class_code(proxy)


def test_a_file_that_many_classes_import_is_read_once_while_it_is_unchanged():
    """Every operator's digest covers ``operators/base.py`` and the modules it imports: the 54 operators read 146
    files 1,071 times before each file's digest was kept while its size and times hold. Two new classes of the
    same bases: the second reads none of the files the first read (its own module, the bases', their imports)."""
    import operators.base

    base = operators.base.__file__
    opened: list[str] = []
    watching = [True]
    sys.addaudithook(lambda event, args: opened.append(args[0]) if watching and event == "open" and args[0] == base
                     else None)  # the files the interpreter opens, as they are opened (a hook stays: switched off)
    try:
        first, second = (type(name, (WordCounter,), {}) for name in ("First", "Second"))
        assert "operators.base" in dict(class_code(first))
        opened.clear()  # the first class's reads (none when an earlier test of this worker read the file)
        assert class_code(second) == class_code(first)
    finally:
        watching.clear()
    assert opened == []  # a read per class before


def test_a_plugins_own_helper_module_is_in_the_key_and_its_edit_changes_it(tmp_path, monkeypatch):
    """A plugin package's helper (``mylab/_helpers.py`` beside the operator's ``mylab/flags.py``) was not read: an
    edit of it in an editable install replayed the old output from the cache."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    package = tmp_path / "mylab_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_helpers.py").write_text('STAMP = "old"\n')
    (package / "flags.py").write_text(STAMP_SOURCE.replace("STAMP] *", "helper.STAMP] *").replace(
        "    def transform", "    def transform").replace(
        "from operators.tables import set_column\n", "from operators.tables import set_column\n\n"
        "from mylab_probe import _helpers as helper\n"))
    monkeypatch.syspath_prepend(str(tmp_path))

    def stamp_class() -> type:  # imported again, as a new process does after an edit
        for name in ("mylab_probe._helpers", "mylab_probe.flags"):
            sys.modules.pop(name, None)
        monkeypatch.setitem(sys.modules, "mylab_probe", load_module(package / "__init__.py", "mylab_probe",
                                                                    monkeypatch))
        sys.modules["mylab_probe"].__path__ = [str(package)]
        return load_module(package / "flags.py", "mylab_probe.flags", monkeypatch).Stamp

    before = dict(class_code(stamp_class()))
    assert {"mylab_probe.flags", "mylab_probe._helpers", "operators.base"} <= set(before)
    (package / "_helpers.py").write_text('STAMP = "fixed"\n')
    after = dict(class_code(stamp_class()))
    assert after["mylab_probe._helpers"] != before["mylab_probe._helpers"]
    assert after["mylab_probe.flags"] == before["mylab_probe.flags"]


# a TESSERA_OPERATORS module's helper beside it (another top-level module), or a module of another package that is
# not installed (a lab's utilities folder on the path), imported where the operator runs: neither was read, so an
# edit of either replayed the old code's output from the cache
@pytest.mark.parametrize("helper_name", ["stamp_sibling_probe", "labutils_probe.text"])
def test_an_edited_helper_of_another_package_misses_its_operators_steps(helper_name, cache, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # each load compiles the file as it is now
    monkeypatch.syspath_prepend(str(tmp_path))
    helper_path = tmp_path / (helper_name.replace(".", "/") + ".py")
    helper_path.parent.mkdir(exist_ok=True)
    if "." in helper_name:
        (helper_path.parent / "__init__.py").write_text("")
    helper_path.write_text(HELPER_SOURCE)
    operator_path = tmp_path / "stamp_user_probe.py"
    operator_path.write_text(STAMPED_SOURCE.format(lazily=" lazily", top="", inside=f"import {helper_name} as helper"))
    results = sample_results(2, 4)

    def run() -> tuple[dict[str, float | None], set[str]]:
        return hits_and_stamps(cache, results)

    def load() -> type:  # a new process: the operator's module imported again, its helper when it runs
        for name in (helper_name, helper_name.partition(".")[0]):
            monkeypatch.delitem(sys.modules, name, raising=False)
        registry.all_operators()
        stamp = load_module(operator_path, "stamp_user_probe", monkeypatch).Stamp
        monkeypatch.setitem(registry._registry, stamp.name, stamp)
        return stamp

    load()
    assert run() == ({"words": 0.0, "stamp": 0.0}, {"old"})
    load()
    assert run() == ({"words": 1.0, "stamp": 1.0}, {"old"})

    helper_path.write_text(HELPER_SOURCE.replace('"old"', '"fixed"'))  # only the helper is edited
    stamp = load()
    assert run() == ({"words": 1.0, "stamp": 0.0}, {"fixed"})  # its operator's step recomputes, words still hits
    assert helper_name in dict(class_code(stamp))  # named as imported, as the plugin's own helpers are


def test_installed_packages_count_by_their_versions_and_local_code_by_its_files(tmp_path, monkeypatch):
    from flows.cache_code import is_local

    (tmp_path / "labhelpers_probe.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert is_local("labhelpers_probe")
    assert not any(is_local(name) for name in ("pyarrow", "pydantic", "json", "sys", "operators", "no_such_module"))


# a built-in's own file in an editable install (its module under operators.), or a module of code no installed
# version covers that a plugin imports (a TESSERA_OPERATORS module's helper beside it), edited under a running
# process (a notebook) that does not reload it: the old code ran, and its output was stored under the key of the
# edited file, which a later process, running the edit, replayed
@pytest.mark.parametrize("edited", ["operators._stamp_probe", "stamp_sibling_probe"])
def test_a_module_edited_under_the_running_process_is_not_cached_as_the_edit(edited, cache, tmp_path, monkeypatch,
                                                                             caplog):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # each load compiles the file as it is now
    monkeypatch.syspath_prepend(str(tmp_path))
    if edited.startswith("operators."):
        operator_name, operator_path = edited, tmp_path / "stamp_probe.py"
        edited_path, old = operator_path, STAMP_SOURCE.replace("[STAMP]", "['old']")
    else:
        operator_name, edited_path, old = "stamp_user_probe", tmp_path / f"{edited}.py", HELPER_SOURCE
        operator_path = tmp_path / "stamp_user_probe.py"
        operator_path.write_text(STAMPED_SOURCE.format(lazily="", top=f"import {edited} as helper", inside="pass"))
    edited_path.write_text(old)
    results = sample_results(2, 4)

    def load() -> None:  # the modules imported (again), the operator looked up (a flow built), as a process does
        monkeypatch.delitem(sys.modules, edited, raising=False)
        stamp = load_module(operator_path, operator_name, monkeypatch).Stamp
        registry.all_operators()
        monkeypatch.setitem(registry._registry, stamp.name, stamp)
        registry.get_operator(stamp.name)

    def run() -> tuple[float | None, set[str]]:
        result = LocalExecutor(cache=cache).run(FLOW, results)
        return result.steps["stamp"].hit_ratio, set(result.table.column("stamp").to_pylist())

    load()
    edited_path.write_text(old.replace("old", "fixed"))
    with caplog.at_level(logging.WARNING, logger="flows.cache_code"):
        assert run() == (0.0, {"old"})  # the code imported before the edit runs
    assert run() == (1.0, {"old"})  # this process's own entries serve it
    load()  # the edit's code, as a new process runs it
    assert run() == (0.0, {"fixed"})  # computed, not the old code's output replayed
    assert f"the file of {edited} changed since this process imported it" in caplog.text
