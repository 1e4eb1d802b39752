"""The Ray Data executor gives what the local executor gives: tables, order, records, metadata, errors.

One local Ray cluster (2 CPUs, ``ray_session`` in conftest) serves the Ray tests. Operators that exist only for
these tests are defined here and shipped to the Ray workers by value (the workers cannot import this file); flows
that use them are built by hand (``flow_by_hand``), since the registry only knows ``operators/<category>/`` modules.
The flows and ``assert_same`` are ray_flows.py's, shared with test_ray_executor_runs.py.
"""

from __future__ import annotations

import logging
import sys
from typing import Iterator

import pyarrow as pa
import pytest
from pydantic import BaseModel, ConfigDict, Field

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.base import Operator, Source
from operators.errors import MissingColumnsError, OperatorError
from operators.registry import all_operators
from operators.tables import qid_groups, set_column
from operators.testing import SAMPLE_CORPUS

ray = pytest.importorskip("ray")
from ray import cloudpickle  # noqa: E402

from flows.executors.ray_data import RayDataExecutor  # noqa: E402
pytest.register_assert_rewrite("tests.flows.ray_flows")  # its asserts say what differs, as a test module's do
from tests.flows.ray_flows import BRANCHES, LINEAR, RESULTS, assert_same, flow_by_hand  # noqa: E402
from tests.text_checks import TRACEBACK  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_session")]  # the session's local Ray (conftest)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


# -- operators for these tests only ---------------------------------------------------


class CountCalls(Operator):
    """Pass rows through and append the size of each call's input to a file."""

    name = "test.count_calls"
    cacheable = False

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str = Field(description="File that receives one line per call.")

    def produces(self) -> dict[str, str]:
        return {"seen": "data"}

    def transform(self, table: pa.Table) -> pa.Table:
        with open(self.params.path, "a", encoding="utf-8") as f:
            f.write(f"{table.num_rows}\n")
        return set_column(table, "seen", pa.array([True] * table.num_rows))


class QueryPositions(Operator):
    """Number each query's rows in the order the call sees them; emit the count as metadata."""

    name = "test.query_positions"
    scope = "query"

    def reads(self) -> None:
        return None

    def produces(self) -> dict[str, str]:
        return {"position": "data"}

    def transform(self, table: pa.Table) -> pa.Table:
        parts = []
        for qid, group in qid_groups(table):
            self.emit_metadata(qid, "rows", group.num_rows)
            parts.append(set_column(group, "position", pa.array(range(group.num_rows), pa.int64())))
        return pa.concat_tables(parts) if parts else set_column(table, "position", pa.array([], pa.int64()))


class Splits(Source):
    """Rows spread over splits; each qid appears in every split, so queries need regrouping."""

    name = "test.splits"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        splits: int = Field(4, description="Number of splits.")
        rows: int = Field(30, description="Rows per split, read in batches of 10.")

    def splits(self) -> list[int]:
        return list(range(self.params.splits))

    def read(self, split: int) -> Iterator[pa.Table]:
        texts = [line for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[: self.params.rows]]
        for start in range(0, self.params.rows, 10):
            rows = range(start, min(start + 10, self.params.rows))
            yield pa.table({
                "qid": [f"q{(split + r) % 5}" for r in rows],
                "docno": [f"s{split}-{r}" for r in rows],
                "text": [texts[r][:200] for r in rows],
                "rank": pa.array([r + 1 for r in rows], pa.int32()),
            })


class OpensLate(Source):
    """Opens its file only when a worker reads it: one gone by then is an ``OSError`` raised there."""

    name = "test.opens_late"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str = Field(..., description="The file to read.")

    def splits(self) -> list[str]:
        return [self.params.path]

    def read(self, split: str) -> Iterator[pa.Table]:
        with open(split, encoding="utf-8") as f:
            yield pa.table({"text": f.read().splitlines()})


class IntIds(Source):
    """A first plugin source's slip: its database's integer ids as the docno column."""

    name = "test.int_ids"

    def read(self, split: None) -> Iterator[pa.Table]:
        yield pa.table({"docno": [1, 2], "text": ["honey bees", "opera singers"]})


def test_a_source_batch_of_the_wrong_type_is_the_local_executors_error_on_ray():
    """Ray's read tasks read a source's splits as the local executor does, through ``Source.read_checked``: an int
    docno is refused naming the read step, not a failure in a later step (tests/flows/test_plugin_source_types.py)."""
    spec = flow_by_hand("ints", [("read", IntIds(), None), ("words", all_operators()["analyze.word_count"](), None)])
    with pytest.raises(OperatorError) as local:
        LocalExecutor().run(spec)
    with pytest.raises(OperatorError) as remote:
        RayDataExecutor().run(spec)
    assert (remote.value.step, remote.value.op, remote.value.message) == (
        local.value.step, local.value.op, local.value.message) == (
        "read", "test.int_ids", "read() yielded a column of another type than the data model's: 'docno' is int64, "
        "expected string; write it as pa.array(values, pa.string())")


@pytest.mark.parametrize("keep_history", [True, False])
def test_linear_flow_matches_local(keep_history):
    spec = FlowSpec.parse(LINEAR)
    context = ray.data.DataContext.get_current()
    before = (context.execution_options.preserve_order, context.enable_progress_bars)
    local = LocalExecutor(keep_history=keep_history).run(spec, RESULTS)
    result = RayDataExecutor(keep_history=keep_history).run(spec, RESULTS)
    assert_same(local, result)
    # a row step over many rows per qid needs a regroup before the first reduce; the
    # second reduce reads whole groups already
    assert "regroup:top" in result.timings.summary()
    assert "regroup:top3" not in result.timings.summary()
    # the run set its options on its own datasets, not on Ray Data's global context
    context = ray.data.DataContext.get_current()
    assert (context.execution_options.preserve_order, context.enable_progress_bars) == before


def test_branches_and_fan_in_match_local():
    spec = FlowSpec.parse(BRANCHES)
    local = LocalExecutor().run(spec, RESULTS)
    result = RayDataExecutor().run(spec, RESULTS)
    assert_same(local, result)
    # the fan-in unions [top, titles]: only titles has n_title, so top's rows get nulls
    assert result.table.column("n_title").null_count > 0
    assert "n_title" not in result.history["top"].column_names  # branches do not see each other
    assert "regroup:joined" in result.timings.summary()


def test_query_step_on_the_queries_reads_whole_groups_without_a_shuffle(caplog):
    queries = pa.table({"qid": ["q2", "q1", "q3"], "query": ["b", "a", "c"]})
    spec = FlowSpec.parse({"name": "on_queries", "steps": {
        "words": {"op": "analyze.word_count", "params": {"input_column": "query"}, "batch_size": 2},
        "top": {"op": "postprocess.reduce", "params": {"k": 1, "rank_column": "word_count"}, "num_gpus": 1},
    }})
    local = LocalExecutor().run(spec, queries)
    with caplog.at_level(logging.WARNING, logger="flows.executors.ray_data"):
        result = RayDataExecutor(keep_history=False).run(spec, queries)
    assert_same(local, result, history=False)
    assert "regroup:top" not in result.timings.summary()  # one row per qid: groups stay whole
    # no GPU in this cluster: the step's GPU request is dropped, not waited for
    assert "step 'top' asks for 1.0 GPU(s)" in caplog.text


def test_a_step_read_by_two_branches_runs_once(tmp_path):
    calls = tmp_path / "calls.txt"
    flow = flow_by_hand("shared", [
        ("count", CountCalls({"path": str(calls)}), None),
        ("words", CountCalls({"path": str(tmp_path / "other.txt")}), ["count"]),
        ("positions", QueryPositions(), ["count"]),
        ("joined", QueryPositions(), ["positions", "words"]),
    ], count={"batch_size": 6})
    local = LocalExecutor().run(flow, RESULTS)
    local_rows = sum(int(n) for n in calls.read_text().split())
    calls.unlink()
    result = RayDataExecutor(keep_history=False).run(flow, RESULTS)
    assert sum(int(n) for n in calls.read_text().split()) == local_rows == RESULTS.num_rows
    assert_same(local, result, history=False)


def test_regrouped_queries_keep_local_order_and_metadata():
    """Rows of each qid come from every split: the regroup must restore the local order."""
    flow = flow_by_hand("splits", [
        ("read", Splits({"splits": 4, "rows": 30}), None),
        ("positions", QueryPositions(), None),
        ("top", all_operators()["postprocess.reduce"]({"k": 4}), None),
    ], positions={"batch_size": 40})
    local = LocalExecutor().run(flow)
    result = RayDataExecutor().run(flow)
    assert_same(local, result)
    assert result.metadata == {f"q{i}": {"rows": 24} for i in range(5)}


def test_real_source_and_preprocessing_match_local():
    spec = FlowSpec.parse({"name": "ingest", "steps": {
        "read": {"op": "sources.jsonl", "params": {"path": str(SAMPLE_CORPUS), "num_splits": 3}},
        "chunks": {"op": "preprocess.chunk", "params": {"unit": "words", "size": 60, "overlap": 10},
                   "batch_size": 100},
        "words": {"op": "analyze.word_count"},
        "unique": {"op": "preprocess.dedup", "params": {"key": "content"}},
    }})
    local = LocalExecutor(keep_history=False).run(spec)
    result = RayDataExecutor(keep_history=False).run(spec)
    assert result.table.num_rows > 1000
    assert_same(local, result, history=False)


def documents_then(step: dict, tmp_path) -> FlowSpec:
    """A flow reading a JSONL file, then ``step``: a source's columns are known only when it runs, so a column the
    file lacks fails in the operator, on Ray as locally (a flow's missing column is refused before it runs)."""
    (tmp_path / "docs.jsonl").write_text('{"docno": "d1", "text": "honey bees"}\n', encoding="utf-8")
    return FlowSpec.parse({"name": "broken", "steps": {
        "read": {"op": "sources.jsonl", "params": {"path": str(tmp_path / "docs.jsonl")}}, "words": step}})


def test_an_operator_error_reaches_the_caller_as_raised(tmp_path):
    spec = documents_then({"op": "analyze.word_count", "params": {"input_column": "missing"}}, tmp_path)
    with pytest.raises(MissingColumnsError) as local:
        LocalExecutor().run(spec)
    with pytest.raises(MissingColumnsError) as remote:
        RayDataExecutor().run(spec)
    assert (remote.value.step, remote.value.op, remote.value.message) == (
        local.value.step, local.value.op, local.value.message)


def test_no_rows_gives_the_operators_empty_output():
    spec = FlowSpec.parse({"name": "empty", "steps": {
        "words": {"op": "analyze.word_count", "params": {"input_column": "query"}},
        "top": {"op": "postprocess.reduce", "params": {"k": 1, "rank_column": "word_count"}},
    }})
    local = LocalExecutor().run(spec)
    result = RayDataExecutor().run(spec)
    assert result.table.num_rows == 0 and "word_count" in result.table.column_names
    assert_same(local, result)


def test_big_outputs_are_yielded_in_pieces_that_keep_qids_whole():
    from flows.executors.group_order import whole_group_pieces

    qids = ["a"] * 5 + ["b"] * 3 + ["c"] * 4 + ["a"] + ["d"] * 6
    table = pa.table({"qid": qids, "x": range(len(qids))})
    pieces = list(whole_group_pieces(table, max_bytes=table.nbytes // 4))
    assert len(pieces) > 1 and pa.concat_tables(pieces).equals(table)
    seen = [set(p.column("qid").to_pylist()) for p in pieces]
    assert all(not (a & b) for i, a in enumerate(seen) for b in seen[i + 1:])


def test_a_chain_of_row_steps_runs_fused_in_one_stage_without_history(tmp_path):
    # 200 of the sample's documents: batches of 7 and 5 rows are still many per block (12 s for the whole sample)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:200]) + "\n", encoding="utf-8")
    spec = FlowSpec.parse({"name": "fused", "steps": {
        "read": {"op": "sources.jsonl", "params": {"path": str(corpus), "num_splits": 3}},
        "stopwords": {"op": "preprocess.stopwords", "params": {"output_column": "clean"}, "batch_size": 7},
        "stem": {"op": "preprocess.stem", "params": {"input_column": "clean"}, "batch_size": 5},
        "words": {"op": "analyze.word_count", "params": {"input_column": "clean"}},
        "unique": {"op": "preprocess.dedup", "params": {"key": "docno"}},
    }})
    for keep_history in (False, True):
        local = LocalExecutor(keep_history=keep_history).run(spec)
        result = RayDataExecutor(keep_history=keep_history).run(spec)
        assert result.table.num_rows > 100
        assert_same(local, result, history=keep_history)
        fused = [k for k in result.timings.summary() if k.startswith("fused:")]
        # the source and its three row steps are one stage; the dedup (corpus) its own
        assert fused == ([] if keep_history else ["fused:read+stopwords+stem+words"])


def test_a_failing_step_on_ray_is_the_local_executors_one_line(tmp_path):
    """The error a caller gets is the operator's own (type, step, field), not Ray's wrapped traceback."""
    from operators.errors import MissingColumnsError

    spec = documents_then({"op": "analyze.word_count", "params": {"input_column": "nope"}}, tmp_path)
    errors = []
    for executor in (LocalExecutor(), RayDataExecutor()):
        with pytest.raises(MissingColumnsError) as err:
            executor.run(spec)
        errors.append(err.value)
    local, ray_ = errors
    assert type(ray_) is MissingColumnsError and (ray_.step, ray_.op) == ("words", "analyze.word_count")
    assert str(ray_) == str(local) and "\n" not in str(ray_) and TRACEBACK not in str(ray_)


def test_an_os_error_on_a_worker_names_its_file(tmp_path):
    """Ray Data adds its retry note to the exception's arguments, which an ``OSError`` reads as its file name: the
    line named that note ("No such file or directory: 'Failed to apply UDF transform ...'") in place of the file."""
    from operators.errors import OperatorError

    gone = tmp_path / "gone.txt"
    flow = flow_by_hand("late", [("read", OpensLate({"path": str(gone)}), None)])
    with pytest.raises(OperatorError) as err:
        RayDataExecutor(cache=None).run(flow)
    assert str(err.value) == f"step 'read': failed on Ray: FileNotFoundError: [Errno 2] No such file or directory: " \
                             f"'{gone}'"


def test_a_warm_start_runs_one_row_once_and_keeps_nothing(tmp_path, monkeypatch):
    """``start(warm=True)`` (``tessera bench``, before its first timed flow) runs a one-row flow through Ray Data
    once per executor, so that the first timed run does not pay for the job's workers; nothing of it reaches the
    executor's step cache, and the local executor accepts the same call."""
    from flows.cache import StepCache

    runs = []
    real_run = RayDataExecutor.run

    def counted(self, flow, queries=None, **kwargs):
        result = real_run(self, flow, queries, **kwargs)
        runs.append((result.flow, result.table.column("word_count").to_pylist()))
        return result

    monkeypatch.setattr(RayDataExecutor, "run", counted)
    executor = RayDataExecutor(cache=StepCache(tmp_path / "cache"))
    executor.start(warm=True)
    executor.start(warm=True)
    executor.start()
    assert runs == [("warm_up", [2])]  # "warm up": one row of two words, once
    assert not (tmp_path / "cache").exists()  # the warm-up had no step cache
    LocalExecutor().start(warm=True)
