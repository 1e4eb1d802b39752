"""A plugin found only through the driver's ``sys.path`` (a notebook's pattern) is not importable by Ray's
workers: the Ray executor refuses the run before any step, naming the plugin's step and how to fix it, instead of
failing in Ray's unpickling with the previous step's name and a worker traceback."""

from __future__ import annotations

import pytest

from flows.api import Flow
from flows.executors.ray_plugins import PluginNotOnWorkersError
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
