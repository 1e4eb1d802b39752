"""A benchmark's options are checked when made, before any dataset is read or any folder written: the
Python API (``BenchOptions``) refuses what the command line's argparse would, naming the argument."""

from __future__ import annotations

import pytest

from flows.bench.errors import BenchError
from flows.bench.results import BenchOptions


@pytest.mark.parametrize("bad, field", [
    ({"ks": []}, "k"), ({"ks": [10, 0]}, "k"), ({"test": "z"}, "test"), ({"correction": "nope"}, "correction"),
    ({"limit": 0}, "limit"), ({"min_relevance": 0}, "min-relevance"), ({"min_relevance": True}, "min-relevance"),
])
def test_a_bad_option_is_refused_naming_it(tmp_path, bad, field):
    with pytest.raises(BenchError) as refused:
        BenchOptions(dataset=tmp_path / "nowhere", flows=["bm25"], out=tmp_path / "out", **bad)
    assert refused.value.field == field
    assert not (tmp_path / "out").exists()


def test_cutoffs_are_sorted_and_each_kept_once(tmp_path):
    options = BenchOptions(dataset=tmp_path, flows=["bm25"], out=tmp_path / "out", ks=[10, 1, 10, 5])
    assert options.ks == [1, 5, 10]
