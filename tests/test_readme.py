"""The README's Python examples run as written: the API tour, and the operator written in one file."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.slow
def test_the_python_tour_runs_as_written(sample_workspace, monkeypatch, capsys):
    """The first block, verbatim, in a clone's layout where ``make demo`` has run (its ``ingest`` resumes)."""
    tour = python_blocks()[0]
    assert "from flows.api import" in tour
    monkeypatch.chdir(sample_workspace)
    scope: dict = {}
    exec(compile(tour, "README.md", "exec"), scope)
    printed = capsys.readouterr().out
    index, hits, result = scope["index"], scope["hits"], scope["result"]
    assert index.report.shards_skipped == 4 and index.report.shards_written == 0  # make demo's index, reused
    assert "1,020 chunks in 4 shard(s)" in printed and "Gothic architecture" in printed
    assert hits.column("title").to_pylist()[0] == "Gothic architecture" and hits.num_rows == 5
    assert sorted(set(result.table.column("qid").to_pylist())) == ["1", "2"]
    assert set(result.history) == {"bm25", "dense", "fused"} and result.steps["fused"].rows_out == result.table.num_rows
    answered = scope["rag"].metadata["1"]
    assert answered["answer"] in printed and "degraded" not in answered
    assert scope["rag"].steps["answer"].usage["llm_calls"] == 1


def test_the_operator_in_one_file_runs_as_written():
    """The operator example, verbatim: called on a table, it writes its chip."""
    example = next(block for block in python_blocks() if "class QueryOverlap(Operator)" in block)
    scope: dict = {"__name__": "operators.analyze.query_overlap"}
    exec(compile(example, "README.md", "exec"), scope)
    table = pa.table({"qid": ["1", "1"], "query": ["honey bees", "honey bees"],
                      "text": ["Bees make honey.", "Wasps do not."]})
    out = scope["QueryOverlap"]()(table)
    assert out.column("overlap").to_pylist() == [2, 0]
    assert scope["QueryOverlap"]().produces() == {"overlap": "chip"}
    titled = scope["QueryOverlap"](input_column="title")  # params as keywords, as a dict takes them
    assert titled.params == scope["QueryOverlap"]({"input_column": "title"}).params
    assert titled(table.append_column("title", pa.array(["Honey", "Bees"]))).column("overlap").to_pylist() == [1, 1]
