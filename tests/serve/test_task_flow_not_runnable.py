"""A task's flow with a step whose input columns no step above brings (``generate.answer`` with no
``generate.context`` in front of it) is a 422 ``flow_not_runnable`` naming the step's param before anything is
queued, as ``/v1/search`` answers the same flow. ``/task/run`` answered 200 with a task that had failed at 0/2, and
``/task/enqueue`` queued it. The API on uvicorn beside a real ``Service`` over the sample index; the refusal comes
before any Ray worker. (A step above that may bring any column, a corpus file's, leaves it to the run.) Saving such a
flow (``PUT /flows/{name}``) is the same 422: it was saved, and every search of it refused."""

from __future__ import annotations

import pytest
import requests

from serve.security import auth
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost

pytestmark = pytest.mark.integration  # the ingested sample is the default index

QUESTION = "Which insects make honey?"
MOSAIC = {"query": QUESTION, "1": {"id": "bm25", "parameters": {"k": "4"}},
          "2": {"id": "generate.answer", "parameters": {"style": "short", "max_tokens": "16"}}}
GATED = {"query": QUESTION, "flow": {"steps": {  # the gate reads dense similarity, which BM25 rows lack
    "bm25": {"op": "retrieve.bm25", "params": {"k": 4}}, "context": {"op": "generate.context"},
    "answer": {"op": "generate.answer", "params": {"max_tokens": 16, "min_relevance": 0.5}}}}}
NATIVE = {"query": QUESTION, "flow": {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 4}},
                                                "answer": {"op": "generate.answer", "params": {"max_tokens": 16}}}}}


@pytest.fixture
def service(tmp_path, monkeypatch, sample_index):
    from serve.service import Service

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    made = Service(resolve(ServiceArgs(default_index=str(sample_index), task_store=f"sqlite:///{tmp_path / 't.db'}",
                                       spare_task_workers=0), environ={}), [], "tessera")
    auth.configure({}, None, None)
    yield made
    made.pruner.stop()


def test_a_task_flow_whose_step_lacks_its_columns_is_refused_before_it_is_queued(service):
    with api_on_localhost() as base:
        searched = requests.post(f"{base}/v1/search", json=NATIVE, timeout=120)
        assert searched.status_code == 422, searched.text
        assert searched.json()["error"]["param"] == "steps.answer.params.context_column"
        for route, body, field in (("run", MOSAIC, "2.parameters"), ("enqueue", MOSAIC, "2.parameters"),
                                   ("run", NATIVE, "steps.answer.params")):  # a mosaicRAG body's field as it wrote it
            refused = requests.post(f"{base}/task/{route}", json=body, timeout=120)
            assert refused.status_code == 422, (route, refused.text)
            error = refused.json()["error"]
            assert (error["param"], error["code"]) == (f"{field}.context_column", "flow_not_runnable")
            assert "needs input column(s) context, context_index, which" in error["message"], error["message"]
        gated = requests.post(f"{base}/task/enqueue", json=GATED, timeout=120)
        assert gated.status_code == 422 and gated.json()["error"]["param"] == "steps.answer.params.relevance_column", \
            gated.text
    assert service.store.list_tasks("local") == []  # nothing was queued


def test_saving_a_flow_whose_step_lacks_its_columns_is_the_searchs_422(service):
    with api_on_localhost() as base:
        searched = requests.post(f"{base}/v1/search", json=NATIVE, timeout=120)
        for body, field in ((NATIVE["flow"], "steps.answer.params"), (MOSAIC, "2.parameters")):
            saved = requests.put(f"{base}/flows/answers", json=body, timeout=120)
            assert saved.status_code == 422, saved.text
            assert saved.json()["error"]["param"] == f"{field}.context_column"
            assert saved.json()["error"]["code"] == "flow_not_runnable"
            if body is NATIVE["flow"]:  # the search's words (a mosaicRAG body's steps are named by their number)
                assert saved.json()["error"]["message"] == searched.json()["error"]["message"]
        assert requests.get(f"{base}/flows", timeout=60).json()["saved"] == []  # nothing was written
