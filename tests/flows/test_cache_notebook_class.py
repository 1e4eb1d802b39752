"""An operator class edited in a notebook cell and run again with the step cache runs the edit. Such a class has no
source file, so its step key held only its bases' files, and the second run replayed the first class's output
without a word. Now its key holds a digest of the class's own code (``flows.cache_cell_code``). A real kernel, a real
step cache on disk; the same class defined again (a cell run twice) still replays."""

from __future__ import annotations

import pytest

from tests.flows.notebook_cells import run_cells

CLASS = """
import pyarrow as pa
from operators.base import Operator
class Tag(Operator):
    name = 'mine.tag'
    LABEL = {label!r}
    def produces(self):
        return {{'tag': 'chip'}}
    def transform(self, table):
        return table.append_column('tag', pa.array([self.LABEL + '{suffix}'] * table.num_rows))
"""
RUN = "result = Flow.load({{'name': 't', 'steps': {{'x': {{'op': 'mine.tag'}}}}}}).run('q', cache={cache!r})\n" \
      "result.table['tag'].to_pylist(), result.cache_hit_ratio"


@pytest.mark.process
def test_a_class_edited_in_a_cell_is_run_again_not_replayed(tmp_path, monkeypatch):
    run = RUN.format(cache=str(tmp_path / "cache"))
    book = run_cells([
        "import os\nos.environ['TESSERA_OPERATORS'] = '__main__'\nfrom flows.api import Flow",
        CLASS.format(label="v", suffix="1") + run,
        CLASS.format(label="v", suffix="1") + run,  # the same cell run again: replayed
        CLASS.format(label="v", suffix="2") + run,  # the method edited
        CLASS.format(label="w", suffix="2") + run],  # a class attribute it reads edited
        tmp_path, monkeypatch)
    shown = [cell.outputs[-1]["data"]["text/plain"] for cell in book.cells[1:]]
    assert shown == ["(['v1'], 0.0)", "(['v1'], 1.0)", "(['v2'], 0.0)", "(['w2'], 0.0)"], shown
