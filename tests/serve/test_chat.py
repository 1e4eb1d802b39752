"""Chats about a task's results on the package's Serve app: created for a finished task of the caller, kept in
the task store, answered by the rag flow's answer path (``generate.context`` then ``generate.answer``)."""

from __future__ import annotations

import json
import re

import pytest
import requests

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def finished_task(serve_app) -> str:
    body = requests.post(serve_app + "/task/run", json={"flow": "bm25", "query": "honey bees"}, timeout=120).json()
    assert body["status"] == "finished", body
    return body["task_id"]


def test_a_chat_is_made_for_a_finished_task_and_a_known_column(serve_app, finished_task):
    response = requests.get(serve_app + "/task/chat/new", params={"task_id": finished_task, "model": "local",
                                                                  "column": "text"}, timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    assert len(response.text) == 32
    bad = requests.get(serve_app + "/task/chat/new", params={"task_id": finished_task, "column": "colour"},
                       timeout=30)
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "column"
    misspelt = requests.get(serve_app + "/task/chat/new", params={"task_id": finished_task, "model": "gemma"},
                            timeout=30)
    assert misspelt.status_code == 422 and misspelt.json()["error"]["param"] == "model"
    assert "did you mean 'gemma2'" in misspelt.json()["error"]["message"]
    unknown = requests.get(serve_app + "/task/chat/new", params={"task_id": "nope"}, timeout=30)
    assert unknown.status_code == 404 and unknown.json()["error"]["message"] == "Task id not found"
    assert unknown.json()["error"]["param"] == "task_id"  # this route's parameter (the task routes' path says id)


def requests_served() -> int:
    from ray import serve

    return serve.get_deployment_handle("smollm2", app_name="tessera").info.remote().result()["requests"]


def test_a_message_is_answered_from_the_task_results(serve_app, finished_task):
    chat = requests.get(serve_app + "/task/chat/new", params={"task_id": finished_task, "model": "local"},
                        timeout=30).text
    before = requests_served()
    answer = requests.get(f"{serve_app}/task/chat/{chat}", params={"message": "Which insects make honey?"},
                          timeout=300).json()
    assert requests_served() == before + 1  # the answer was written on the smollm2 deployment (model local)
    task = requests.get(f"{serve_app}/task/progress/{finished_task}", timeout=30).json()
    docnos = {row["docno"] for row in task["result"]["data"]}
    assert answer["answer"].strip() and set(answer["sources"]) <= docnos


@pytest.mark.slow
def test_a_follow_up_is_asked_with_the_chat_before_it(serve_app, finished_task):
    chat = requests.get(serve_app + "/task/chat/new", params={"task_id": finished_task, "model": "local"},
                        timeout=30).text
    first = requests.get(f"{serve_app}/task/chat/{chat}", params={"message": "Which insects make honey?"},
                         timeout=300).json()
    assert "standalone_query" not in first  # nothing before it
    follow = requests.get(f"{serve_app}/task/chat/{chat}", params={"message": "How do they make it?"},
                          timeout=300).json()
    said = " ".join(re.sub(r"\s*\[\d+\]", "", first["answer"]).split())  # as the conversation keeps it
    assert follow["standalone_query"] == f"How do they make it? (Which insects make honey?; {said})"


@pytest.mark.slow
def test_a_streamed_answer_comes_as_it_is_written_then_the_reply_it_keeps(serve_app, finished_task):
    """stream=true: {text} pieces while the model writes (the start of the answer), then the reply the unstreamed
    route gives (greedy: the same), then [DONE]; the exchange is kept, so the next message is a follow-up."""
    def new_chat() -> str:
        return requests.get(serve_app + "/task/chat/new", params={"task_id": finished_task, "model": "local"},
                            timeout=30).text

    question = {"message": "Which insects make honey?"}
    whole = requests.get(f"{serve_app}/task/chat/{new_chat()}", params=question, timeout=300).json()
    chat = new_chat()
    response = requests.get(f"{serve_app}/task/chat/{chat}", params={**question, "stream": "true"}, stream=True,
                            timeout=300)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in response.iter_lines(decode_unicode=True) if line]
    assert events[-1] == "[DONE]"
    pieces = [json.loads(e)["text"] for e in events[:-2]]
    reply = json.loads(events[-2])
    assert len(pieces) > 1 and reply["answer"].startswith("".join(pieces).strip())
    assert {**reply, "chat_id": None} == {**whole, "chat_id": None}
    follow = requests.get(f"{serve_app}/task/chat/{chat}", params={"message": "How do they make it?"},
                          timeout=300).json()
    assert follow["standalone_query"].startswith("How do they make it? (Which insects make honey?;")
