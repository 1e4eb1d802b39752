"""``FlowResult.description``: the run's summary line counts rows, queries and steps in the singular for one; a
``StepRecord`` as printed."""

from __future__ import annotations

import pytest

from flows.result import FlowResult, StepRecord
from operators.testing import sample_results


def test_one_step_one_query_and_one_row_are_said_in_the_singular():
    """``tessera run`` printed "flow: 3 rows, 1 query, 1 steps in 0.41 s"."""
    table = sample_results(1, 1)
    result = FlowResult("bm25", table, steps={"bm25": StepRecord("bm25", "retrieve.bm25", rows_out=1)}, seconds=0.41)
    assert result.description() == "1 row, 1 query, 1 step in 0.41 s (local executor), cache off"


def test_several_are_said_in_the_plural():
    table = sample_results(2, 3)
    steps = {s: StepRecord(s, op) for s, op in (("bm25", "retrieve.bm25"), ("words", "analyze.word_count"))}
    result = FlowResult("bm25", table, steps=steps, metadata={"q1": {}, "q2": {}}, seconds=1.5)
    assert result.description(queries=3) == ("6 rows, 3 queries (1 with no results), 2 steps in 1.50 s "
                                             "(local executor), cache off")
    assert "metadata for 2 queries" in repr(result)


def test_a_step_left_uncached_is_named_beside_the_cache_hit_ratio():
    """An answer step at temperature 0.7 ran each time, yet the line said "cache hit ratio 100%"."""
    steps = {"bm25": StepRecord("bm25", "retrieve.bm25", units=1, hits=1, cached=True),
             "answer": StepRecord("answer", "generate.answer", units=1, cached=False)}
    result = FlowResult("rag", sample_results(1, 2), steps=steps, seconds=2.0)
    assert result.description().endswith("2 steps in 2.00 s (local executor), cache hit ratio 100% (answer not "
                                         "cached)")


def test_tessera_run_prints_the_text_a_step_wrote_under_each_row_of_its_table():
    """summarize.documents' summaries and relevance marks had no column in the table: only --json showed them."""
    import io

    import pyarrow as pa
    from rich.console import Console

    from flows.commands._results import print_results

    table = sample_results(1, 2)
    table = table.append_column("summary", pa.array(["Kea are alpine parrots. " * 20, None]))
    result = FlowResult("summarize", table, roles={"summary": "text", "text": "text", "docno": "id"})
    out = io.StringIO()
    print_results(Console(file=out, width=200), result, pa.table({"qid": ["q1"], "query": ["kea"]}), top=5)
    printed = out.getvalue()
    first = table.column("docno")[0].as_py()
    assert f"summary (1 {first}): Kea are alpine parrots." in printed and printed.count("summary (") == 1
    assert "…" in printed  # cut at 300 characters (--json has it whole)


def test_a_step_record_prints_its_seconds_to_three_digits_and_usage_only_where_spent():
    """``result.steps`` printed each step's seconds to 16 digits and an empty ``usage={}``."""
    fast = StepRecord("dense", "retrieve.dense", rows_in=2, rows_out=8, units=2, hits=2, seconds=0.0007292980008,
                      cached=True)
    assert repr(fast) == ("StepRecord(step='dense', op='retrieve.dense', rows_in=2, rows_out=8, units=2, hits=2, "
                          "seconds=0.000729, cached=True)")
    spent = StepRecord("answer", "generate.answer", rows_in=5, rows_out=5, seconds=13.80012, usage={"llm_calls": 1})
    assert repr(spent).endswith("seconds=13.8, cached=False, usage={'llm_calls': 1})")
    assert spent.seconds == 13.80012  # the record keeps every digit


def test_an_attribute_a_result_lacks_says_where_it_is():
    """``rag.answer``, ``result.to_pandas()`` and ``result.tabel`` were bare ``AttributeError``s of the dataclass."""
    import pyarrow as pa

    from operators.errors import TesseraError

    result = FlowResult("rag", pa.table({"qid": ["7"]}), metadata={"7": {"answer": "Bees.", "references": []}})
    said = {"answer": "a FlowResult has no 'answer'; answer is per-query metadata: result.metadata['7']['answer']",
            "to_pandas": "a FlowResult has no 'to_pandas'; the rows are a pyarrow Table: result.table.to_pandas",
            "tabel": "a FlowResult has no 'tabel'; did you mean 'table'? (it has: cache_hit_ratio, cache_read_only, "}
    for name, message in said.items():
        with pytest.raises(AttributeError) as err:
            getattr(result, name)
        assert isinstance(err.value, TesseraError) and str(err.value).startswith(message)
    assert not hasattr(result, "answer") and result.metadata["7"]["answer"] == "Bees."
