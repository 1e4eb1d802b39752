"""A misspelt step id in a ``FlowResult`` (``r.history["bm26"]``, ``r.steps["fuse"]``) is a ``KeyError`` that names
the close step ids and those the result has, not a bare ``KeyError: 'bm26'``; one asked of a run that kept no
history (``keep_history=False``) says so; a qid ``metadata`` lacks says why (a number, a flow that writes none).
``history``, ``steps`` and ``metadata`` stay dicts otherwise."""

from __future__ import annotations

import pytest

from flows.result import FlowResult, StepRecord
from operators.errors import TesseraError


@pytest.fixture
def flow(bm25_index):
    from flows.api import Flow

    return Flow.load({"name": "top", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
                                               "top": {"op": "postprocess.reduce", "params": {"k": 2},
                                                       "inputs": ["bm25"]}}}, index=bm25_index)


def test_a_misspelt_step_id_names_the_close_one_and_the_steps(flow):
    result = flow.run("classical music")
    for what, typo, meant in (("history", "bm26", "bm25"), ("steps", "tops", "top")):
        with pytest.raises(KeyError) as err:
            getattr(result, what)[typo]
        assert isinstance(err.value, TesseraError)
        assert str(err.value) == f"no step '{typo}' in this result's {what}; did you mean '{meant}'? (steps: bm25, top)"
    assert isinstance(result.history, dict) and isinstance(result.steps, dict)
    assert result.history["top"].equals(result.table) and result.steps["bm25"].op == "retrieve.bm25"
    assert result.history.get("bm26") is None and "bm26" not in result.steps  # get and in as a dict's
    assert list(result.history) == ["bm25", "top"] and dict(result.steps).keys() == {"bm25", "top"}


def test_the_history_of_a_run_that_kept_none_says_it_was_not_kept(flow):
    result = flow.run("classical music", keep_history=False)
    assert result.history == {} and list(result.steps) == ["bm25", "top"]
    with pytest.raises(KeyError, match=r"step 'bm25' ran, but the run kept no history \(keep_history=False\): "
                                       "run with keep_history=True"):
        result.history["bm25"]
    with pytest.raises(KeyError, match=r"no step 'bm26' in this result's history; did you mean 'bm25'\? "
                                       r"\(steps: bm25, top\); the run kept no history \(keep_history=False\)"):
        result.history["bm26"]


def test_a_plain_dict_set_on_a_result_is_checked_too():
    """The Ray executor sets ``result.steps`` to a dict of its own once its steps have run."""
    result = FlowResult("bm25", table=None)
    result.steps = {"bm25": StepRecord("bm25", "retrieve.bm25")}
    result.history = {}
    with pytest.raises(KeyError, match="did you mean 'bm25'"):
        result.steps["bm2"]
    with pytest.raises(KeyError, match="'bm25' ran, but the run kept no history"):
        result.history["bm25"]


def test_a_qid_the_metadata_lacks_says_why(flow):
    """``result.metadata[1]`` (a qid as the number it was given as) and ``metadata["1"]`` of a flow that writes no
    metadata (a search, no answer step) were bare ``KeyError``s."""
    result = flow.run({7: "classical music"})
    assert result.metadata == {} and isinstance(result.metadata, dict)
    for key in (7, "7"):
        with pytest.raises(KeyError) as err:
            result.metadata[key]
        assert isinstance(err.value, TesseraError)
        assert str(err.value).startswith(f"no metadata for query {key!r}: no step of flow 'top' wrote any (metadata "
                                         "is what generate.answer, generate.references, query.contextualize and "
                                         "summarize.results write per query")

    import pyarrow as pa

    answered = FlowResult("rag", table=pa.table({"qid": ["1", "1", "2"]}))
    answered.metadata = {"1": {"answer": "Bees."}}  # a plain dict, as an executor sets it
    said = {1: "no query 1 in this result's metadata: qids are text, as in every Tessera table: metadata['1']",
            "2": "no metadata for query '2': no step of flow 'rag' wrote any for it (queries with metadata: 1)",
            "l": "no query 'l' in this result's metadata (queries: 1)"}
    for key, message in said.items():
        with pytest.raises(KeyError) as err:
            answered.metadata[key]
        assert str(err.value) == message
    assert answered.metadata["1"]["answer"] == "Bees." and answered.metadata.get(1) is None
