"""An unknown flow's name at the service says the closest names, as the CLI does (``flows.store.did_you_mean``,
``operators.errors.close_names``): the 422 of a search or a task that names it, the 404 of
``GET``/``DELETE /flows/{name}``, and the 404 of a chat whose ``model`` is neither a served model nor a flow that
answers. A name close to none says no guess; an empty one says it is empty, without the list. The service's FastAPI
app under uvicorn on 127.0.0.1 with real HTTP (no Ray: nothing runs); the chat's target in-process."""

from __future__ import annotations

import pytest
import requests

from serve.chat.chat import chat_target
from serve.http.errors import ApiError


def error_of(answer: requests.Response, status: int, param: str) -> str:
    error = answer.json()["error"]
    assert (answer.status_code, error["param"]) == (status, param), answer.text
    return error["message"]


def test_an_unknown_flow_says_the_closest_names(base):
    search = requests.post(f"{base}/v1/search", json={"flow": "bm2", "query": "honey"}, timeout=60)
    assert "no flow named 'bm2'; did you mean 'bm25'" in error_of(search, 422, "flow")
    run = requests.post(f"{base}/task/run", json={"flow": "hybird", "query": "honey"}, timeout=60)
    assert "; did you mean 'hybrid'" in error_of(run, 422, "flow")
    shouted = requests.post(f"{base}/v1/search", json={"flow": "HYBRID", "query": "honey"}, timeout=60)
    assert "no flow named 'HYBRID'; did you mean 'hybrid'" in error_of(shouted, 422, "flow")  # case alone
    got = requests.get(f"{base}/flows/rga", timeout=30)
    assert error_of(got, 404, "name").startswith("no flow named 'rga'; did you mean 'rag'")

    mine = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}}}
    assert requests.put(f"{base}/flows/honey_search", json=mine, timeout=60).status_code == 201
    saved = requests.post(f"{base}/v1/search", json={"flow": "honey_serch", "query": "honey"}, timeout=60)
    assert "did you mean 'honey_search'?" in error_of(saved, 422, "flow")
    deleted = requests.delete(f"{base}/flows/honey-search", timeout=30)
    assert error_of(deleted, 404, "name") == "no saved flow named 'honey-search'; did you mean 'honey_search'?"

    long = "x" * 300  # quoted cut to 60 characters, as other messages quote what they were sent
    searched = requests.post(f"{base}/v1/search", json={"flow": long, "query": "honey"}, timeout=60)
    for answer, status in ((requests.get(f"{base}/flows/{long}", timeout=30), 404),
                           (requests.delete(f"{base}/flows/{long}", timeout=30), 404), (searched, 422)):
        message = error_of(answer, status, "flow" if status == 422 else "name")
        assert f"'{'x' * 60}…'" in message and "x" * 61 not in message, message[:200]

    far = requests.post(f"{base}/v1/search", json={"flow": "zzzzzz", "query": "honey"}, timeout=60)
    assert "did you mean" not in error_of(far, 422, "flow") and "(built-in: " in far.text  # the list, as before
    assert "did you mean" not in error_of(requests.get(f"{base}/flows/zzzzzz", timeout=30), 404, "name")



def test_an_empty_flow_is_said_to_be_empty_without_the_list_of_flows(base):
    """``"flow": ""`` (the web UI sent it before its flow list came) was "no flow named ''" and every flow's name."""
    for route in ("/v1/search", "/task/run"):
        for empty in ("", "  "):
            answer = requests.post(f"{base}{route}", json={"flow": empty, "query": "honey"}, timeout=60)
            message = error_of(answer, 422, "flow")
            assert message.startswith("field 'flow': the flow is empty: name a built-in or saved flow"), message
            assert "no flow named" not in message and "built-in:" not in message and "bm25" not in message, message

def test_a_chat_for_an_unknown_model_says_the_closest_flow(make_service):
    make_service()
    with pytest.raises(ApiError) as err:
        chat_target("rga", {}, "local")
    assert err.value.status == 404 and "flow that answers; did you mean 'rag'" in err.value.message
