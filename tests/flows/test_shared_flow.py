"""One ``Flow`` shared by several threads (an app serving requests): each run gets back its own per-query
metadata and usage, and an operator's own error names its step."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from operators import create
from operators.errors import OperatorError
from operators.query.contextualize import QueryContextualizer

SPEC = {"name": "ctx", "steps": {"ctx": {"op": "query.contextualize", "params": {"method": "history"}},
                                 "bm25": {"op": "retrieve.bm25", "params": {"k": 3}, "inputs": ["ctx"]}}}
THREADS, CALLS = 4, 20


def test_threads_sharing_a_flow_each_get_exactly_their_own_querys_metadata(bm25_index, tmp_path, monkeypatch):
    from flows.api import Flow

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    flow = Flow.load(SPEC, index=bm25_index)
    # Every call of the contextualizer waits, after recording its metadata, until all threads have recorded
    # theirs: the interleaving that let one run drain another's record, made certain instead of by chance.
    meet = threading.Barrier(THREADS, timeout=30)
    real = QueryContextualizer.transform

    def transform_then_meet(self, table):
        out = real(self, table)
        meet.wait()
        return out

    monkeypatch.setattr(QueryContextualizer, "transform", transform_then_meet)

    def worker(tid: int) -> list[tuple[str, dict]]:
        got = []
        for i in range(CALLS):
            talk = [{"role": "user", "content": f"thread {tid} call {i}"}, {"role": "assistant", "content": "ok"}]
            qid = f"{tid}-{i}"
            result = flow.run(pa.table({"qid": [qid], "query": ["honey bees"], "messages": [json.dumps(talk)]}))
            got.append((qid, result.metadata))
        return got

    with ThreadPoolExecutor(THREADS) as pool:
        results = [r for rs in pool.map(worker, range(THREADS)) for r in rs]
    assert len(results) == THREADS * CALLS
    for qid, metadata in results:
        tid, i = qid.split("-")
        assert set(metadata) == {qid}, f"{qid} got metadata of {sorted(metadata)}"
        assert metadata[qid]["standalone_query"].startswith("honey bees")
        assert f"thread {tid} call {i}" in metadata[qid]["standalone_query"]


def test_an_operators_records_in_a_recording_block_are_that_blocks_alone():
    """Two threads record on one operator instance (metadata, a degraded mark, usage): each drains its own."""
    op = create("summarize.documents", {"model": "local"}, step_id="sum")
    meet = threading.Barrier(2, timeout=30)

    def call(qid: str):
        with op.recording() as notes:
            op.emit_metadata(qid, "summary", f"about {qid}")
            op.mark_degraded(qid, f"timeout on {qid}")
            op.record_usage(llm_calls=1 if qid == "a" else 2)
            meet.wait()  # both have recorded before either drains
            return op.drain_metadata(), notes.drain_usage()

    with ThreadPoolExecutor(2) as pool:
        (meta_a, usage_a), (meta_b, usage_b) = pool.map(call, ["a", "b"])
    assert meta_a == {"a": {"summary": "about a", "degraded": {"step": "sum", "reason": "timeout on a"}}}
    assert meta_b == {"b": {"summary": "about b", "degraded": {"step": "sum", "reason": "timeout on b"}}}
    assert (usage_a, usage_b) == ({"llm_calls": 1}, {"llm_calls": 2})
    assert op.drain_metadata() == {} and op.drain_usage() == {}  # nothing left on the shared instance
    op.emit_metadata("c", "summary", "direct")  # outside a recording block: the instance's own, as before
    assert op.drain_metadata() == {"c": {"summary": "direct"}}


def test_an_operator_error_raised_by_the_operator_itself_names_its_step(monkeypatch):
    op = create("query.contextualize", {"method": "history"}, step_id="ctx")

    def fails(self, table):
        raise OperatorError("the history is not a list")

    monkeypatch.setattr(QueryContextualizer, "transform", fails)
    with pytest.raises(OperatorError) as err:
        op(pa.table({"qid": ["1"], "query": ["bees"], "messages": ["[]"]}))
    assert (err.value.step, err.value.op) == ("ctx", "query.contextualize")
    assert str(err.value) == "step 'ctx', operator 'query.contextualize': the history is not a list"


def test_the_api_names_the_errors_to_catch_and_tessera_error_catches_them():
    import flows.api as api
    from operators import errors

    assert api.TesseraError is errors.TesseraError
    for name in ("SpecError", "ParamsError", "OperatorError", "MissingModelsError", "MissingEnvError", "FlowCancelled"):
        assert name in api.__all__ and issubclass(getattr(api, name), api.TesseraError)
    with pytest.raises(api.TesseraError, match="retrieve.bm26"):
        api.Flow.load({"name": "x", "steps": {"a": {"op": "retrieve.bm26"}}})
