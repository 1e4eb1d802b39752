"""What a notebook (or a PyTerrier user) asks of a ``Flow`` that it lacks: ``flow.search(q)``, ``flow.index``, a
misspelt ``flow.runn``, and ``flow >> other``. Each was Python's bare ``AttributeError`` or "unsupported operand
type(s) for >>"; each now says what a flow does instead."""

from __future__ import annotations

import pytest

from operators.errors import SpecError, TesseraError


@pytest.mark.parametrize("name, said", [
    ("search", "a Flow has no 'search'; a Flow runs with flow.run(queries) (one text, a list, a dict {qid: text} or "
               "a qid, query table)"),
    ("index", "a Flow has no 'index'; the flow's index is Flow.load's: Flow.load(flow, index=...) gives it another"),
    ("runn", "a Flow has no 'runn'; did you mean 'run'? (it has: built, "),
])
def test_an_attribute_a_flow_lacks_says_what_a_flow_does_instead(bm25_index, name, said):
    from flows.api import Flow

    flow = Flow.load("bm25", index=bm25_index)
    with pytest.raises(AttributeError) as err:
        getattr(flow, name)
    assert isinstance(err.value, TesseraError) and str(err.value).startswith(said)
    assert not hasattr(flow, name) and hasattr(flow, "run") and not callable(flow)


def test_pyterrier_operators_on_flows_say_that_a_pipeline_is_a_spec(bm25_index):
    from flows.api import Flow

    flow = Flow.load("bm25", index=bm25_index)
    for combine in (lambda: flow >> flow, lambda: flow + flow, lambda: flow % 10):
        with pytest.raises(TypeError) as err:
            combine()
        assert isinstance(err.value, SpecError) and err.value.message.startswith(
            "there is no operator algebra on flows (PyTerrier's >>, +, %): a pipeline is a spec, where >> is a step "
            "after another")


def test_a_flow_prints_what_each_step_reads_where_it_is_not_the_step_before(bm25_index):
    """``Flow('hybrid': bm25 (retrieve.bm25) -> dense (retrieve.dense) -> fused (fuse.rrf))`` said that dense read
    bm25's rows; it reads the queries, and fused both."""
    from flows.api import Flow

    assert repr(Flow.load("hybrid", index=bm25_index)) == (
        "Flow('hybrid': bm25 (retrieve.bm25); dense (retrieve.dense <- queries); fused (fuse.rrf <- bm25 + dense))")
    assert repr(Flow.load("rag", index=bm25_index)).startswith(
        "Flow('rag': standalone (query.contextualize) -> bm25 (retrieve.bm25); dense (retrieve.dense <- standalone); "
        "fused (fuse.rrf <- bm25 + dense) -> per_doc (postprocess.dedup) -> top (postprocess.reduce) -> ")
    assert repr(Flow.load("bm25", index=bm25_index)) == "Flow('bm25': bm25 (retrieve.bm25))"
