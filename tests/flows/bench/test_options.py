"""A benchmark's options are checked when made, before any dataset is read or any folder written: the
Python API (``BenchOptions``) refuses what the command line's argparse would, naming the argument."""

from __future__ import annotations

import pytest

from flows.bench.errors import BenchError
from flows.bench.results import BenchOptions


@pytest.mark.parametrize("bad, field", [
    ({"ks": []}, "k"), ({"ks": [10, 0]}, "k"), ({"test": "z"}, "test"), ({"correction": "nope"}, "correction"),
    ({"limit": 0}, "limit"), ({"min_relevance": 0}, "min-relevance"), ({"min_relevance": True}, "min-relevance"),
    # a text limit failed in Python's words (TypeError), True was one query; a cutoff of 10.5 became 10, and the
    # text "10" the cutoffs 1 and 0 (the message named ['1', '0'])
    ({"limit": "5"}, "limit"), ({"limit": True}, "limit"), ({"ks": [10.5]}, "k"), ({"ks": "10"}, "k"),
    ({"ks": [True]}, "k"),
    # a text for a list was read letter by letter (the flows 'b', 'm', '2', '5'), a number and None failed in
    # Python's words (AttributeError, TypeError), a split of None read qrels/None.tsv and '../x' a file outside qrels/
    ({"flows": "bm25"}, "flow"), ({"flows": [5]}, "flow"), ({"baselines": "bm25"}, "baseline"),
    ({"dataset": None}, "dataset"), ({"out": None}, "out"), ({"split": None}, "split"),
    ({"split": "../qrels/test"}, "split"),
])
def test_a_bad_option_is_refused_naming_it(tmp_path, bad, field):
    with pytest.raises(BenchError) as refused:
        BenchOptions(**{"dataset": tmp_path / "nowhere", "flows": ["bm25"], "out": tmp_path / "out", **bad})
    assert refused.value.field == field
    assert repr(next(iter(bad.values()))) in refused.value.message  # the value as given
    assert not (tmp_path / "out").exists()


def test_cutoffs_are_sorted_and_each_kept_once(tmp_path):
    options = BenchOptions(dataset=tmp_path, flows=["bm25"], out=tmp_path / "out", ks=[10, 1, 10, 5])
    assert options.ks == [1, 5, 10]


def test_docs_name_the_python_api_as_it_is():
    """docs/benchmarks.md, "From Python", lists BenchOptions' arguments and BenchResult's fields by name (what
    notebooks/benchmarking.ipynb uses): a renamed or new field shows up here."""
    import dataclasses
    import re
    from pathlib import Path

    from flows.bench import BenchResult

    doc = (Path(__file__).resolve().parents[3] / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = doc.split("### From Python", 1)[1].split("\n### ", 1)[0]
    options_text, result_text = section.split("`BenchOptions` takes", 1)[1].split("The result (`BenchResult`)", 1)
    named = set(re.findall(r"`([a-z_]+)`", options_text))
    assert {f.name for f in dataclasses.fields(BenchOptions)} - {"out_shown"} == named
    fields = {f.name for f in dataclasses.fields(BenchResult)} - {"options", "ks", "baselines", "flows"}
    assert fields <= set(re.findall(r"`([a-z_]+)`", result_text))
