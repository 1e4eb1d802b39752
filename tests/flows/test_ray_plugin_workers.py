"""A plugin found only through the driver's ``sys.path`` (a notebook's pattern) is not importable by Ray's
workers: the Ray executor refuses the run before any step, naming the plugin's step and how to fix it, instead of
failing in Ray's unpickling with the previous step's name and a worker traceback."""

from __future__ import annotations

import pytest

from flows.api import Flow
from flows.executors.ray_plugins import PluginNotOnWorkersError
from operators.errors import OperatorError
from tests.operators.test_plugins import FLAGS, OPERATOR, PACKAGE, flow_spec, fresh_registry, write_package  # noqa: F401

pytestmark = pytest.mark.ray


def test_a_plugin_only_on_the_drivers_path_is_refused_naming_its_step(
        tmp_path, monkeypatch, fresh_registry, ray_session):  # noqa: F811
    root = write_package(tmp_path / "notebook", {"flags": FLAGS})
    monkeypatch.syspath_prepend(str(root))  # the driver imports it; the workers' path does not hold it
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.flags")
    flow = Flow.load(flow_spec(tmp_path))
    assert flow.built.operators["flag"].name == OPERATOR
    events = []
    with pytest.raises(PluginNotOnWorkersError) as caught:
        flow.run("honey bees", executor="ray", progress=events.append)
    err = caught.value
    assert (err.step, err.field) == ("flag", "steps.flag.op")
    assert f"module '{PACKAGE}.flags', which Ray's workers cannot import" in err.message
    assert f"No module named '{PACKAGE}'" in err.message and f"PYTHONPATH={root}" in err.message
    assert "a cluster's workers take the PYTHONPATH of the shell that ran `ray start`" in err.message
    assert events == []  # refused before bm25 ran


# A connection, not a lock: once Ray Serve ran in the process (another test's app), Ray's cloudpickle sends a lock as
# a new one (serve/_private/utils.py registers it), and the class travels.
LOCKED = '''
import sqlite3

from operators.base import Operator

DB = sqlite3.connect(":memory:", check_same_thread=False)  # a notebook's global that a method uses: travels with
# the class, and cannot


class LockedFlagger(Operator):
    """Flags rows, as a table of its database says."""

    name = "mylab.locked_flag"

    def transform(self, table):
        DB.execute("select 1")
        return table
'''


def test_an_operator_class_ray_cannot_pickle_is_refused_naming_its_step(tmp_path, plugin_module, ray_session):
    """A class that travels by value (a notebook's ``__main__``, here a module registered with cloudpickle's
    ``register_pickle_by_value``) whose method uses a connection failed in Ray's serialisation with a bare TypeError
    and a page of Ray's diagnosis, naming no step; the local executor runs it."""
    import importlib

    from ray import cloudpickle

    module = importlib.import_module(plugin_module("locked", LOCKED))
    spec = flow_spec(tmp_path)
    spec["steps"]["flag"] = {"op": "mylab.locked_flag"}
    flow = Flow.load(spec)
    assert flow.run("honey bees").table.num_rows == 2
    cloudpickle.register_pickle_by_value(module)
    try:
        events = []
        with pytest.raises(PluginNotOnWorkersError) as caught:
            flow.run("honey bees", executor="ray", progress=events.append)
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    err = caught.value
    assert (err.step, err.field) == ("flag", "steps.flag.op")
    assert "operator mylab.locked_flag is defined in " in err.message
    assert "so Ray sends the class itself to its workers" in err.message
    assert "(TypeError: cannot pickle 'sqlite3.Connection' object)" in err.message and "in setup()" in err.message
    assert events == []  # refused before bm25 ran


WORKER_SHY = '''
import ray

from operators.base import Operator


class WorkerShy(Operator):
    """Builds on the driver, not on a Ray worker (a licence, a file or a variable only the driver has)."""

    name = "mylab.worker_shy"

    def __init__(self, *args, **kwargs):
        if ray.is_initialized() and ray._private.worker.global_worker.mode == ray.WORKER_MODE:
            raise RuntimeError("no licence on this node")
        super().__init__(*args, **kwargs)

    def transform(self, table):
        return table
'''


def test_an_operator_that_cannot_be_built_on_an_actor_names_the_step_and_the_workers_error(
        tmp_path, plugin_module, ray_session):
    """An actor whose creation raised was 'failed on Ray: The actor died because of an error raised in its creation
    task, <colour codes>ray::MapWorker(...)...': Ray's note, without the exception the operator raised."""
    import importlib

    from ray import cloudpickle

    module = importlib.import_module(plugin_module("worker_shy", WORKER_SHY))
    spec = flow_spec(tmp_path)
    spec["steps"]["flag"] = {"op": "mylab.worker_shy", "concurrency": 1}
    cloudpickle.register_pickle_by_value(module)  # the workers get the class itself, as a notebook's
    try:
        with pytest.raises(OperatorError) as caught:
            Flow.load(spec).run("honey bees", executor="ray")
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert caught.value.step == "flag"
    assert caught.value.message == ("failed on Ray: an actor of the stage could not start: RuntimeError: no licence "
                                    "on this node")


STAMPED = '''
import pyarrow as pa

from operators.base import Operator
from operators.tables import set_column


class Stamper(Operator):
    """Writes its code's stamp."""

    name = "mylab.stamp"

    def produces(self):
        return {"stamp": "data"}

    def transform(self, table):
        return set_column(table, "stamp", pa.array(["old"] * table.num_rows))
'''

EDITING = '''
import json, pathlib, sys
from flows.api import Flow

spec, cache = json.loads(sys.argv[1]), sys.argv[2]


def run(**options):
    result = Flow.load(spec).run("honey bees", executor="ray", **options)
    return [result.table.column("stamp")[0].as_py(), result.steps["stamp"].hits]


if sys.argv[3] == "edit":
    print(json.dumps(run()))  # without the cache: the workers import the module, nothing is keyed
    probe = pathlib.Path(sys.argv[4])
    probe.write_text(probe.read_text().replace('"old"', '"new"'))
print(json.dumps(run(cache=cache)))
'''


#: The plugin of ``STAMPED`` taking its stamp from a module beside it (another top-level module, which no installed
#: version covers): before, the key did not read it, and then not that a worker imported it before an edit.
STAMPED_BY_HELPER = STAMPED.replace("from operators.tables import set_column\n",
                                    "from operators.tables import set_column\nfrom stamp_helper import STAMP\n"
                                    ).replace('["old"]', "[STAMP]")


@pytest.mark.slow  # two scripts, each starting a Ray of its own
@pytest.mark.parametrize("edited", ["stamp_probe.py", "stamp_helper.py"])
def test_a_plugin_edited_under_a_running_ray_is_not_cached_as_the_edit(edited, tmp_path):
    """A notebook's Ray keeps its workers: one that imported the plugin for a run without the cache, then keyed it
    for a cached run after the file (or a helper module beside it) was edited, stored the old code's output under
    the edited file's key, and a new process running the edit replayed it."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "stamp_probe.py").write_text(STAMPED if edited == "stamp_probe.py" else STAMPED_BY_HELPER)
    (plugins / "stamp_helper.py").write_text('STAMP = "old"\n')
    spec = flow_spec(tmp_path)
    spec["steps"] = {"bm25": spec["steps"]["bm25"], "stamp": {"op": "mylab.stamp"}}
    environ = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {
        "PYTHONPATH": f"{repo}{os.pathsep}{plugins}", "TESSERA_OPERATORS": "stamp_probe",
        "TESSERA_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"}

    def script(*args: str) -> list:
        done = subprocess.run([sys.executable, "-c", EDITING, json.dumps(spec), str(tmp_path / "cache"), *args],
                              cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]

    assert script("edit", str(plugins / edited)) == [["old", 0], ["old", 0]]  # the workers' code ran
    assert script("again") == [["new", 0]]  # the edit computed, not the old output replayed
