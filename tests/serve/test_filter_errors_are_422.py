"""A metadata filter that turns out wrong only once the flow runs (a column the index or the rows lack, a value of
another type, a bad filter inside a ``retrieve.multi_collection`` collection) is the request's mistake: a 422
``flow_not_runnable`` naming ``steps.<id>.params.filter``, as docs/serving.md says, not a 500. A damaged index is
its own 409 (``index_damaged``), not the filter's. Real BM25 indices and a real SQLite task store, through
``Service`` and the search route's functions (what /v1/search and the chat routes call); nothing runs on Ray."""

from __future__ import annotations

import pyarrow as pa
import pytest

from serve.http.errors import ApiError
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost, run_search, two_document_index


def build_index(path) -> None:
    """A real BM25 index of two documents with an integer ``year`` column."""
    two_document_index(path, year=pa.array([2024, 2020], pa.int64()))


@pytest.fixture
def service(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    for name in ("news", "damaged"):
        build_index(home / "indices" / name)
    args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    return Service(resolve(args, environ={}), [], "tessera")


def bm25(flt: dict, **params) -> dict:
    return {"b": {"op": "retrieve.bm25", "params": {"k": 5, "filter": flt, **params}}}


def searched(steps: dict) -> dict:
    return run_search({"flow": {"steps": steps}, "query": "honey", "index": "news"}, "local")


def test_a_good_filter_runs(service):
    hits = searched(bm25({"field": "year", "eq": 2024}))["results"][0]["hits"]
    assert [hit["docno"] for hit in hits] == ["bees#0"]


@pytest.mark.parametrize("steps, says", [
    (bm25({"field": "nope", "eq": 1}), "['nope'] not found"),
    (bm25({"field": "nope", "eq": 1}, filter_mode="post"), "['nope'] not found"),
    (bm25({"field": "year", "eq": "abc"}), "value 'abc' does not fit column 'year'"),
    (bm25({"field": "year", "month": 3}), "holds years"),
    # an integer column: no Arrow integer type holds 10**30 (a column of doubles compares it as one)
    (bm25({"field": "year", "eq": 10 ** 30}), "filter {field: year, eq: 1000000000000000000000000000000}: value "
     "1000000000000000000000000000000 does not fit column 'year' of type int64 (an integer; beyond what any Arrow "
     "integer type holds"),
    (bm25({"field": "year", "in": [2024, -10 ** 30]}, filter_mode="post"), "does not fit column 'year' of type "
     "int64 (an integer; beyond what any Arrow integer type holds"),
    # a column neither the index nor a step above has: refused before BM25 runs (tests/flows/test_column_params.py)
    ({"b": {"op": "retrieve.bm25", "params": {"k": 5}},
      "f": {"op": "postprocess.filter", "params": {"filter": {"field": "nope", "eq": 1}}}},
     "needs input column(s) nope, which no step above it writes"),
    # a number for a column of text: it would compare as text ('10' before '9'), in every mode
    (bm25({"field": "title", "gt": 5}), "filter {field: title, gt: 5}: value 5 does not fit column 'title' of type "
     "string (an integer; the column holds text, compared character by character, not as numbers"),
    (bm25({"field": "title", "eq": 2.5}, filter_mode="post"), "value 2.5 does not fit column 'title' of type string "
     "(a number; the column holds text"),
    ({"b": {"op": "retrieve.bm25", "params": {"k": 5}},
      "f": {"op": "postprocess.filter", "params": {"filter": {"field": "title", "in": ["Bees", 7]}}}},
     "filter {field: title, in: ['Bees', 7]}: value 7 does not fit column 'title' of type string (an integer; the "
     "column holds text"),
    ({"m": {"op": "retrieve.multi_collection", "params": {"collections": [
        {"name": "a", "index": "news"}, {"name": "b", "index": "news", "filter": {"field": "year", "eq": "abc"}}]}}},
     "value 'abc' does not fit column 'year'"),
])
def test_a_filter_that_fails_when_the_flow_runs_is_a_422_naming_it(service, steps, says):
    with pytest.raises(ApiError) as err:
        searched(steps)
    assert (err.value.status, err.value.code) == (422, "flow_not_runnable"), err.value.message
    nested = "m" in steps  # a collection's own step (m_b) is no step of the spec: its field as the operator names it
    assert err.value.param.startswith("params.filter" if nested else f"steps.{list(steps)[-1]}.params.filter")
    assert says in err.value.message


def test_a_filtered_search_of_a_damaged_index_is_its_409_not_the_filters(service, tmp_path):
    for shard in (tmp_path / "home" / "indices" / "damaged" / "shards").iterdir():
        (shard / "docs.parquet").write_bytes(b"not parquet")  # damaged on disk: the index's problem, not the request's
    with pytest.raises(ApiError) as err:
        run_search({"flow": {"steps": bm25({"field": "year", "eq": 2024})}, "query": "honey", "index": "damaged"},
                   "local")
    assert (err.value.status, err.value.code, err.value.param) == (409, "index_damaged", "index"), err.value.message
    assert "damaged shard" in err.value.message  # tests/serve/test_damaged_index.py: over HTTP, each kind of damage


def test_over_http_it_is_the_documented_422(service):
    import requests


    def search(flt: dict) -> requests.Response:
        return requests.post(f"{base}/v1/search", json={"flow": {"steps": bm25(flt)}, "query": "honey",
                                                        "index": "news"}, timeout=60)

    with api_on_localhost() as base:
        response = search({"field": "nope", "eq": 1})
        number_on_text = search({"field": "title", "lte": 5})
        quoted = search({"field": "title", "lte": "C"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("flow_not_runnable", "steps.b.params.filter")
    assert "'nope'" in error["message"]
    assert number_on_text.status_code == 422, number_on_text.text
    error = number_on_text.json()["error"]
    assert (error["code"], error["param"]) == ("flow_not_runnable", "steps.b.params.filter")
    assert "value 5 does not fit column 'title' of type string (an integer; the column holds text" in error["message"]
    assert "quote the value: '5'" in error["message"], error["message"]
    assert quoted.status_code == 200 and [hit["docno"] for hit in quoted.json()["results"][0]["hits"]] == \
        ["bees#0"], quoted.text  # quoted, it compares as text: 'Ants' and 'Bees' sort before 'C' ('Ants' has no honey)


@pytest.mark.parametrize("flt, says", [
    ({"field": "year", "eq": None}, "'eq: null' is no condition"),  # it said "'field: year' has no condition"
    ({"field": "year", "in": []}, "'in' needs at least one value"),  # it found nothing without a word
    ({"field": "year", "date_from": "2024-02-30"}, "must be a valid date"),
])
def test_a_filter_the_author_got_wrong_is_a_422_saying_what_to_write(service, flt, says):
    """Refused as the request is prepared: a ``SpecError``, which the app answers as a 422 ``invalid_spec`` whose
    ``param`` is its field (``serve.http.errors``)."""
    from operators.errors import SpecError

    with pytest.raises(SpecError) as err:
        searched(bm25(flt))
    assert err.value.field.startswith("steps.b.params.filter") and says in err.value.message, err.value.message


def test_a_task_whose_filter_its_index_lacks_is_refused_before_it_is_queued(service):
    """``/task/enqueue`` took it (202) and the task failed at its start, where ``/v1/search`` refuses the same flow."""
    import asyncio

    body = {"flow": {"steps": bm25({"field": "titel", "eq": 1})}, "query": "honey", "index": "news"}
    with pytest.raises(ApiError) as refused:
        asyncio.run(service.enqueue(body, "local"))
    assert (refused.value.status, refused.value.code, refused.value.param) == (
        422, "flow_not_runnable", "steps.b.params.filter")
    assert "['titel'] not found" in refused.value.message
    assert service.store.list_tasks("local") == []  # nothing queued


def test_a_postprocess_filter_inside_multi_collection_is_refused_as_its_field_before_anything_runs(service):
    """A column no collection gives, in a ``postprocess.filter`` run on ``retrieve.multi_collection``'s merged rows:
    the search failed after both collections were searched, naming a step of no spec (``params.filter`` of
    ``m_post0``), and a task was queued and failed. Now a 422 naming the field in full, as a step's, and no task."""
    import asyncio

    import requests

    steps = {"m": {"op": "retrieve.multi_collection", "params": {
        "collections": [{"name": "a", "index": "news"}, {"name": "b", "index": "news"}],
        "postprocess": [{"op": "postprocess.filter", "params": {"filter": {"field": "yaer", "gt": 2000}}}]}}}
    body = {"flow": {"steps": steps}, "query": "honey", "index": "news"}
    with api_on_localhost() as base:
        response = requests.post(f"{base}/v1/search", json=body, timeout=60)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("flow_not_runnable", "steps.m.params.postprocess.0.params.filter")
    assert error["message"].startswith("step 'm', operator 'postprocess.filter', field 'steps.m.params.postprocess.0."
                                       "params.filter': needs input column(s) yaer, which neither the steps before it "
                                       "in params.postprocess nor the searches of params.collections write"), error
    with pytest.raises(ApiError) as refused:
        asyncio.run(service.enqueue(body, "local"))
    assert (refused.value.status, refused.value.param) == (422, "steps.m.params.postprocess.0.params.filter")
    assert service.store.list_tasks("local") == []  # nothing queued
