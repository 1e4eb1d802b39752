"""Over HTTP, a step may not ask for more than the service gives (``limits``, serve/runs/step_bounds.py): its
``concurrency``, ``batch_size``, ``num_cpus`` and ``num_gpus``, and the params that set how many calls run at once,
how long one waits and how often it is retried (``concurrency``, ``timeout``, ``max_retries``...), each a 422 naming
the field and the limit, on a search, a task, a nested step and a saved flow; values at the limit run. Before, a flow
could ask for ``concurrency: 100000`` or ``timeout: 1e9``. The service's FastAPI app under uvicorn on 127.0.0.1, no
Ray (every refusal comes before a task starts)."""

from __future__ import annotations

import requests

from tests.serve.conftest import api_on_localhost, two_document_index

BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}
ANSWER = {"op": "generate.answer", "params": {"model": "local"}}


def refused(base: str, route: str, steps: dict) -> dict:
    answer = requests.post(base + route, json={"flow": {"steps": steps}, "query": "bees", "index": "notes"},
                           timeout=60)
    assert answer.status_code == 422, answer.text
    return answer.json()["error"]


#: Steps over a limit, each with the field and the limit its 422 names.
OVER = [
    ({**BM25, "concurrency": 100_000}, "steps.s.concurrency", "max_step_concurrency"),
    ({**BM25, "batch_size": 10**9}, "steps.s.batch_size", "max_step_batch_size"),
    ({**BM25, "num_cpus": 1024}, "steps.s.num_cpus", "max_step_num_cpus"),
    ({**BM25, "num_gpus": 8}, "steps.s.num_gpus", "max_step_num_gpus"),
    ({**ANSWER, "params": {"model": "local", "timeout": 1e9}}, "steps.s.params.timeout", "max_call_timeout_s"),
    ({**ANSWER, "params": {"model": "local", "num_retries": 1000}}, "steps.s.params.num_retries", "max_call_retries"),
    ({**ANSWER, "params": {"model": "local", "concurrency": 100_000}}, "steps.s.params.concurrency",
     "max_step_concurrency"),
]


def test_a_step_asking_for_more_than_the_service_gives_is_a_422_naming_it(notes_api):
    """One server for every case (each is a request, not a server start)."""
    for route in ("/v1/search", "/task/enqueue"):
        for step, field, limit in OVER:
            error = refused(notes_api, route, {"bm25": BM25, "s": {**step, "inputs": ["bm25"]}})
            assert (error["param"], error["code"]) == (field, limit), (route, error)
            assert f"over this service's limit {limit}=" in error["message"], error
    assert requests.get(f"{notes_api}/tasks", timeout=30).json()["tasks"] == []


def test_a_nested_step_s_param_is_bounded_too(notes_api):
    api = {"op": "rerank.api", "params": {"url": "https://rerank.example/v1/rerank", "max_retries": 50}}
    multi = {"op": "retrieve.multi_collection", "params": {"collections": [{"name": "a", "index": "notes"}],
                                                           "postprocess": [api]}}
    error = refused(notes_api, "/v1/search", {"m": multi})
    assert (error["param"], error["code"]) == ("steps.m.params.postprocess.0.params.max_retries",
                                               "max_call_retries"), error


def test_a_saved_flow_over_a_limit_is_a_422_and_is_not_saved(notes_api):
    answer = requests.put(notes_api + "/flows/greedy", json={"steps": {"bm25": {**BM25, "concurrency": 100_000}}},
                          timeout=60)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["param"] == "steps.bm25.concurrency"
    assert requests.get(notes_api + "/flows/greedy", timeout=60).status_code == 404


def test_values_at_the_limits_run(notes_api):
    step = {**BM25, "concurrency": 16, "batch_size": 10_000, "num_cpus": 16, "num_gpus": 1}
    answer = requests.post(notes_api + "/v1/search", json={"flow": {"steps": {"bm25": step}}, "query": "bees",
                                                      "index": "notes"}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert [hit["doc_id"] for hit in answer.json()["results"][0]["hits"]] == ["bees"]


def test_the_limits_are_the_service_s_settings(make_service):
    service = make_service(limits={"max_step_concurrency": 2, "max_call_timeout_s": 30})
    two_document_index(service.indices.folder / "notes")
    with api_on_localhost() as url:
        error = refused(url, "/v1/search", {"bm25": {**BM25, "concurrency": 3}})
        assert (error["param"], error["code"]) == ("steps.bm25.concurrency", "max_step_concurrency"), error
        assert "max_step_concurrency=2" in error["message"], error
        api = {"op": "rerank.api", "params": {"url": "https://rerank.example/v1/rerank", "timeout": 31}}
        error = refused(url, "/v1/search", {"bm25": BM25, "r": api})
        assert (error["param"], error["code"]) == ("steps.r.params.timeout", "max_call_timeout_s"), error


def test_a_flow_of_more_steps_than_max_steps_is_a_422_naming_steps_before_it_is_built(make_service):
    """A flow of 9,000 searches saved over HTTP took a minute, and run held a replica at 9 GB until Ray killed it;
    one saved by the CLI made ``GET /flows`` build it for minutes. Every way a flow comes is counted first."""
    from flows import store
    from flows.spec import FlowSpec

    service = make_service(limits={"max_steps": 3})
    two_document_index(service.indices.folder / "notes")
    many = {"steps": {f"s{i}": BM25 for i in range(4)}}
    store.save("wide", FlowSpec.parse(many))  # the CLI's owner: no key, as this app has none
    mosaic = {"query": "bees", **{str(i): {"id": "bm25", "parameters": {"index": "notes"}} for i in range(1, 5)}}
    with api_on_localhost() as url:
        for route, body in [("/v1/search", {"flow": many, "query": "bees", "index": "notes"}),
                            ("/v1/search", {"flow": "wide", "query": "bees", "index": "notes"}),
                            ("/task/enqueue", {"flow": many, "query": "bees", "index": "notes"}),
                            ("/task/run", mosaic)]:
            answer = requests.post(url + route, json=body, timeout=60)
            assert answer.status_code == 422, (route, answer.text)
            error = answer.json()["error"]
            assert (error["param"], error["code"]) == ("steps", "max_steps"), (route, error)
            assert error["message"] == "the flow has 4 steps, over this service's limit max_steps=3", error
        answer = requests.put(url + "/flows/wider", json=many, timeout=60)
        assert (answer.status_code, answer.json()["error"]["code"]) == (422, "max_steps"), answer.text
        assert requests.get(url + "/flows/wider", timeout=60).status_code == 404
        status = requests.get(url + "/flows", timeout=60).json()["status"]["wide"]
        assert status == {"runnable": False, "reason": "the flow has 4 steps, over this service's limit max_steps=3"}
        three = {"s0": BM25, "s1": BM25, "s": {"op": "fuse.rrf", "inputs": ["s0", "s1"]}}
        answer = requests.post(url + "/v1/search", json={"flow": {"steps": three}, "query": "bees", "index": "notes"},
                               timeout=60)
        assert answer.status_code == 200, answer.text
        assert requests.get(url + "/tasks", timeout=30).json()["tasks"] == []
