"""A DataFrame of queries with a missing qid names the row: pandas holds whole-number qids with a None as floats
(``[1.0, NaN]``), which was refused as 'column qid ... got double', a type the caller never wrote. And what a
refusal says ``Flow.run`` accepts lists every form it takes, dicts too."""

from __future__ import annotations

import pandas as pd
import pyarrow.compute as pc
import pytest

from operators.errors import SpecError


@pytest.fixture
def flow(bm25_index, tmp_path, monkeypatch):
    from flows.api import Flow

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return Flow.load("bm25", index=bm25_index)


@pytest.mark.parametrize("qids, row", [([1, None], 2), ([None, 2, 3], 1), ([1.0, float("nan")], 2)])
def test_a_data_frame_with_a_missing_qid_names_its_row(flow, qids, row):
    frame = pd.DataFrame({"qid": qids, "query": ["classical music"] * len(qids)})
    with pytest.raises(SpecError) as err:
        flow.run(frame)
    assert err.value.field == "queries.qid"
    assert err.value.message == f"qid of row {row} of {len(qids)} is empty (null): each query needs an id"


def test_fractional_qids_are_still_refused_as_such_and_whole_ones_taken(flow):
    with pytest.raises(SpecError, match="column qid of the queries table must be text or whole numbers, got double"):
        flow.run(pd.DataFrame({"qid": [1.5, 2.0], "query": ["classical music", "action film"]}))
    taken = flow.run(pd.DataFrame({"qid": [1, 2], "query": ["classical music", "action film"]}))
    assert set(taken.table.column("qid").to_pylist()) <= {"1", "2"}


@pytest.mark.parametrize("given", [None, 5, ["classical music", 7]])
def test_a_refusal_lists_the_dicts_flow_run_takes_and_a_dict_is_taken(flow, given):
    with pytest.raises(SpecError) as err:
        flow.run(given)
    assert "a dict {qid: text} or of columns qid and query" in err.value.message
    assert flow.run({"q1": "classical music"}).table.num_rows > 0  # the form named is one it takes


@pytest.mark.parametrize("given", [{"classical music", "action film"}, frozenset({"classical music"})])
def test_a_set_of_queries_is_refused_as_its_order_and_so_its_qids_change_between_runs(flow, given):
    with pytest.raises(SpecError) as err:  # it was numbered in the set's order: qid 1 another query in another run
        flow.run(given)
    assert err.value.field == "queries"
    assert f"queries is a {type(given).__name__}, whose order Python does not keep" in err.value.message
    assert "pass a list (sorted(queries) for a fixed order)" in err.value.message
    ordered = flow.run({"classical music": 1, "action film": 2}.keys())  # a dict's keys keep their order
    assert ordered.table.filter(pc.equal(ordered.table["qid"], "1"))["query"][0].as_py() == "classical music"


@pytest.mark.parametrize("record, said", [
    ({"_id": "zz", "text": ["a", "b"]}, "a query's text is a JSON string, not an array"),  # searched as "['a', 'b']"
    ({"_id": "zz", "text": 123}, "a query's text is a JSON string, not a number"),
    ({"_id": ["z"], "text": "honey"}, "a query's id is a JSON string, not an array (an id may be a number too)"),
])
def test_a_query_whose_text_or_id_is_not_a_string_is_refused_naming_its_line(tmp_path, record, said):
    import json

    from flows.queries import read_queries

    path = tmp_path / "queries.jsonl"
    path.write_text(json.dumps({"_id": "q1", "text": "bees"}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(SpecError) as err:
        read_queries(path)
    assert err.value.message == f"{path}:2: {said}"
    path.write_text(json.dumps({"_id": 7, "text": "bees"}) + "\n")  # a number as the id: taken, as text
    assert read_queries(path).column("qid").to_pylist() == ["7"]
