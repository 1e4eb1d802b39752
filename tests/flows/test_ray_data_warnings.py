"""Ray Data warnings that a Tessera run drops: here, the actor pool that got fewer inputs than actors.

``tessera run rag --executor ray`` printed Ray Data's "The minimum number of concurrent actors for '...' is set
to 2, but the operator only received 1 input(s)" (six lines): the rag spec's answer step asks for two actors and a
few queries make one block. Harmless, so the executor filters exactly that warning; the others stay.
"""

from __future__ import annotations

import warnings

import pytest

from flows.spec import FlowSpec
from operators.testing import sample_results

pytestmark = pytest.mark.ray


def test_a_pool_larger_than_its_inputs_runs_without_ray_datas_warning(ray_session):
    from flows.executors.ray_data import RayDataExecutor

    spec = FlowSpec.parse({"name": "few", "steps": {"words": {"op": "analyze.word_count", "concurrency": 2}}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # shown every time unless a filter drops it (Ray warns once per place)
        result = RayDataExecutor().run(spec, sample_results(1, 3))
        warnings.warn("a warning of another kind", UserWarning)
    assert result.table.num_rows == 3
    texts = [str(w.message) for w in caught]
    assert not [t for t in texts if "minimum number of concurrent actors" in t], texts
    assert "a warning of another kind" in texts
