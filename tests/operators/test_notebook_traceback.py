"""A Tessera error in a notebook cell shows the cell's line and the error, not Tessera's own frames. IPython showed
``Flow.load("hybrd")`` with 34 lines of Tessera's checks above the one line that says what to fix, and a Ray run's
failure with 49 lines of the run's follower; now the cells and functions that called Tessera, the error, and how to
see the rest. An error raised from another (a plugin's ``KeyError``) keeps IPython's whole traceback, and so does
every error with ``TESSERA_DEBUG`` on. A real kernel (nbclient), real Tessera calls."""

from __future__ import annotations

import re

import pytest

from operators.errors import SpecError
from operators.notebook_traceback import LEFT_OUT
from tests.flows.notebook_cells import run_cells

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def shown(cell) -> str:
    """The traceback a notebook shows under ``cell``, without its colours."""
    (error,) = [out for out in cell.outputs if out["output_type"] == "error"]
    return ANSI.sub("", "\n".join(error["traceback"]))


@pytest.mark.process
def test_a_cell_s_tessera_error_shows_the_cell_not_tessera_s_frames(tmp_path, monkeypatch):
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    book = run_cells([
        "import os\nfrom flows.api import Flow",
        "def load(name):\n    return Flow.load(name)\nload('hybrd')",
        "import pyarrow as pa\nfrom operators.base import Operator\n"
        "class Broken(Operator):\n    name = 'mine.broken'\n    def transform(self, table):\n"
        "        return {}['missing']\nBroken()(pa.table({'text': ['a']}))",
        "os.environ['TESSERA_DEBUG'] = '1'\nFlow.load('hybrd')"], tmp_path, monkeypatch, allow_errors=True)
    short = shown(book.cells[1])
    assert "load('hybrd')" in short and "return Flow.load(name)" in short  # the cell and its function
    assert "SpecError: field 'spec': no flow spec file or built-in flow named 'hybrd'" in short
    assert "did you mean 'hybrid'?" in short and short.endswith(LEFT_OUT)
    assert "flows/" not in short and "specfile.py" not in short, short
    caused = shown(book.cells[2])  # the plugin's own frame, and Tessera's that wrapped it
    assert "return {}['missing']" in caused and "operators/base.py" in caused and LEFT_OUT not in caused
    debug = shown(book.cells[3])
    assert "flows/specfile.py" in debug and LEFT_OUT not in debug


def test_outside_ipython_an_error_has_no_renderer():
    assert not hasattr(SpecError("x"), "_render_traceback_")
