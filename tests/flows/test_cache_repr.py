"""A ``StepCache`` shows as one line naming its folder, as ``FlowResult`` does (it was ``<flows.cache.StepCache object
at 0x...>``), and showing it creates nothing: a notebook that prints a cache it never used finds no folder made."""

from __future__ import annotations

import pyarrow as pa

from flows.cache import StepCache
from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec

SPEC = {"name": "words", "steps": {"words": {"op": "analyze.word_count", "params": {"input_column": "query"}}}}


def test_a_step_cache_shows_its_folder_in_one_line_and_showing_it_makes_nothing(tmp_path):
    root = tmp_path / "cache"
    cache = StepCache(root)
    assert repr(cache) == f"StepCache({str(root)!r}: not created yet)"
    assert not root.exists()
    LocalExecutor(cache=cache).run(FlowSpec.parse(SPEC).build(), pa.table({"qid": ["q1"], "query": ["honey bees"]}))
    assert repr(cache) == f"StepCache({str(root)!r})" == repr(StepCache(str(root)))
    cache.close()
