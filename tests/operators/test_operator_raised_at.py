"""An exception a step's own code raises names the line of the operator's package it came through
(``operators/raised_at.py``): before, a plugin author read ``step 'flag', operator 'mylab.flag': KeyError: 'txt'``
and nothing of where. The plugin is a real package written into ``tmp_path`` and registered through
``TESSERA_OPERATORS``, run in a real flow over real BM25 results and by ``tessera run`` in a subprocess."""

from __future__ import annotations

import pytest

from operators.errors import OperatorError
from tests.flows.test_cli import tessera_process
from tests.operators.test_operator_output import flow
from tests.operators.test_plugins import PACKAGE, fresh_registry, load_plugin  # noqa: F401 - a fixture

RAISING = '''\
"""Operators whose code fails as a first try's does."""

import pyarrow as pa
import pyarrow.compute as pc

from operators.base import Operator
from tessera_mylab._helpers import lowered


class Misnamed(Operator):
    """Read a column by a misspelt name."""

    name = "mylab.misnamed"

    def transform(self, table):
        texts = table.to_pydict()["txt"]
        return table


class Lowerer(Operator):
    """Lower the text through a helper, which hands pyarrow a number."""

    name = "mylab.lowerer"

    def transform(self, table):
        return lowered(table)


class Declarer(Operator):
    """Declare a column by a param it does not have."""

    name = "mylab.declarer"

    def produces(self):
        return {self.params.output_column: "chip"}

    def transform(self, table):
        return table


class Counter(Operator):
    """Read a number from a param that holds a name."""

    name = "mylab.counter"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.count = int(self.step_id)

    def transform(self, table):
        return table


class Loader(Operator):
    """Load a model file that is not there."""

    name = "mylab.loader"

    def setup(self):
        open("/nonexistent/model.bin", "rb")

    def transform(self, table):
        return table
'''

HELPERS = '''\
import pyarrow.compute as pc


def lowered(table):
    pc.utf8_lower(table.column("text"))
    return pc.utf8_lower(3)
'''


@pytest.fixture
def raising(tmp_path, monkeypatch, fresh_registry):  # noqa: F811 - the imported fixture
    root = load_plugin(tmp_path, monkeypatch, {"raising": RAISING, "_helpers": HELPERS}, "raising")
    return root


def line_of(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def test_an_exception_in_transform_names_the_plugins_line(raising, tmp_path):
    with pytest.raises(OperatorError) as err:
        flow(tmp_path, ("flag", "mylab.misnamed", {})).run("honey bees")
    at = line_of(RAISING, '["txt"]')
    assert err.value.message == (f"KeyError: 'txt' (at {PACKAGE}/raising.py:{at}, in transform); its batch held "
                                 "query '1'")
    assert (err.value.step, err.value.op) == ("flag", "mylab.misnamed")


def test_a_librarys_exception_names_the_line_of_the_plugins_own_code_that_called_it(raising, tmp_path):
    with pytest.raises(OperatorError) as err:
        flow(tmp_path, ("lower", "mylab.lowerer", {})).run("honey bees")
    at = line_of(HELPERS, "utf8_lower(3)")
    assert err.value.message.endswith(f" (at {PACKAGE}/_helpers.py:{at}, in lowered); its batch held query '1'"), \
        err.value.message


def test_a_failed_setup_names_the_plugins_line(raising, tmp_path):
    with pytest.raises(OperatorError) as err:
        flow(tmp_path, ("load", "mylab.loader", {})).run("honey bees")
    at = line_of(RAISING, "model.bin")
    assert err.value.message.startswith("its setup failed: FileNotFoundError: ")
    assert err.value.message.endswith(f" (at {PACKAGE}/raising.py:{at}, in setup)"), err.value.message


@pytest.mark.parametrize("op, words, where", [
    ("mylab.declarer", "its produces() failed: AttributeError: ", "self.params.output_column: "),
    ("mylab.counter", "constructing it failed: ValueError: ", "int(self.step_id)"),
])
def test_a_plugins_declaration_or_constructor_that_fails_as_the_flow_is_built_names_its_line(raising, tmp_path, op,
                                                                                             words, where):
    from flows.api import Flow

    with pytest.raises(OperatorError) as err:
        Flow.load({"name": "f", "steps": {"x": {"op": op}}})
    method = "produces" if op == "mylab.declarer" else "__init__"
    assert (err.value.step, err.value.op) == ("x", op)
    assert err.value.message.startswith(words)
    assert err.value.message.endswith(f" (at {PACKAGE}/raising.py:{line_of(RAISING, where)}, in {method})")


@pytest.mark.process
def test_tessera_run_prints_where_the_plugin_failed(raising, tmp_path, monkeypatch):
    import json
    import os

    from tests.operators.test_plugins import CORPUS

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS))
    spec = tmp_path / "flow.yaml"
    spec.write_text(f"name: f\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: '{corpus}', k: 2}}}}\n"
                    "  flag: {op: mylab.misnamed}\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(raising), os.environ.get("PYTHONPATH", "")]))
    done = tessera_process("run", str(spec), "-q", "honey bees", "--no-cache", home=tmp_path / "home", check=2)
    at = line_of(RAISING, '["txt"]')
    assert (f"tessera: error: step 'flag', operator 'mylab.misnamed': KeyError: 'txt' "
            f"(at {PACKAGE}/raising.py:{at}, in transform)") in done.stderr
