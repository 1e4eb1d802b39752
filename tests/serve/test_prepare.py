"""``Service.prepare`` builds a flow no more often than it must: a search's spec once as asked (to refuse a flow
that reads documents and to cut it to ``top_k``) and once as it runs, a task's once; and the cut is the one the
search asked for. Real specs over a real task store; nothing runs, so no Ray."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from serve.http.errors import ApiError


@pytest.fixture
def service(make_service):
    return make_service()


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """The name of each spec built from here on (``FlowSpec.build`` itself runs)."""
    built, build = [], FlowSpec.build

    def counted(spec: FlowSpec):
        built.append(spec.name)
        return build(spec)

    monkeypatch.setattr(FlowSpec, "build", counted)
    return built


def test_a_search_builds_its_spec_twice_and_cuts_it_to_top_k(service, builds):
    prepared = service.prepare({"flow": "bm25", "query": "honey", "top_k": 150}, "local", search=True)
    assert len(builds) == 2
    steps = prepared.spec.steps
    assert steps["bm25"].params["k"] == 150  # a retrieval step fetches at least top_k
    assert steps["search_top_k"].op == "postprocess.reduce" and steps["search_top_k"].params == {"k": 150}
    assert steps["search_top_k"].inputs == ["bm25"] and prepared.spec.output == "search_top_k"
    assert prepared.flow.spec is prepared.spec and prepared.steps == ["bm25", "search_top_k"]


def test_a_task_builds_its_spec_once(service, builds):
    prepared = service.prepare({"flow": "bm25", "queries": ["honey", "bees"]}, "local")
    assert len(builds) == 1 and prepared.spec.output is None and prepared.steps == ["bm25"]
    assert prepared.queries == [{"qid": "1", "query": "honey"}, {"qid": "2", "query": "bees"}]


def test_a_search_with_a_flow_that_reads_documents_is_refused_first(service, builds):
    with pytest.raises(ApiError) as err:  # before the empty query: the order of the checks is kept
        service.prepare({"flow": "ingest", "query": " "}, "local", search=True)
    assert (err.value.status, err.value.code) == (422, "not_a_search_flow") and len(builds) == 1
