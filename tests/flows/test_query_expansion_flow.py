"""The bm25_expanded flow: expanded queries searched beside the original and merged back onto it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.api import Flow
from flows.spec import FlowSpec

SPEC = Path(__file__).resolve().parents[2] / "flows" / "specs" / "bm25_expanded.yaml"


@pytest.mark.integration
def test_expanded_queries_are_searched_and_merged_per_question(fault_models, sample_index):
    fault_models.reply = "honey bee colonies\ngothic cathedral architecture"
    spec = yaml.safe_load(SPEC.read_text())
    spec["steps"]["expand"]["params"]["model"] = "fault-ok"
    FlowSpec.model_validate(spec)
    result = Flow.load(spec, index=sample_index).run(["which insects make honey"])
    table = result.table
    assert set(table.column("qid").to_pylist()) == {"1"}
    assert set(table.column("query").to_pylist()) == {"which insects make honey"}
    docnos = table.column("docno").to_pylist()
    assert len(docnos) == len(set(docnos)) and table.column("rank").to_pylist() == list(range(1, len(docnos) + 1))
    searched = result.history["bm25"]
    assert set(searched.column("qid").to_pylist()) == {"1", "1#1", "1#2"}
    original_only = sum(q == "1" for q in searched.column("qid").to_pylist())
    assert len(docnos) > original_only   # the extra queries found documents the question alone did not
