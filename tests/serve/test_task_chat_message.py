"""``GET /task/chat/{id}?message=``: a message the chat's flow cannot take as its query (blank, over
``max_query_chars``) is a 422 naming ``message``, the parameter the client sent (it named ``query``). The service's
FastAPI app under uvicorn on 127.0.0.1 with a real SQLite task store; the finished task is written to the store as a
task worker writes it (no Ray, no model call: the message is refused before the flow runs)."""

from __future__ import annotations

import httpx
import pytest

from tests.serve.conftest import api_on_localhost, finished_search


@pytest.fixture
def chat_url(make_service):
    service = make_service()
    task_id = finished_search(service)
    with api_on_localhost() as url:
        made = httpx.get(f"{url}/task/chat/new", params={"task_id": task_id}, timeout=60)
        assert made.status_code == 200, made.text
        yield f"{url}/task/chat/{made.text}"


@pytest.mark.parametrize("stream", [False, True])
def test_a_blank_or_too_long_message_is_a_422_naming_message(chat_url, stream):
    for message, code in (("   ", "empty_query"), ("bees " * 2001, "max_query_chars")):
        answer = httpx.get(chat_url, params={"message": message, "stream": stream}, timeout=60)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert (error["param"], error["code"]) == ("message", code), error
        assert error["message"].startswith("message: the message ")


def test_a_reply_with_no_answer_is_kept_but_not_asked_with_by_the_follow_up(make_service, fault_models):
    """The chat's model replies with no text: its reply says "No answer could be written (...)" and is kept, marked
    ``answered: false``; the next message's search is the question before it and itself, not the failure's words."""
    service = make_service()
    task_id = finished_search(service)
    with api_on_localhost() as url:
        made = httpx.get(f"{url}/task/chat/new", params={"task_id": task_id, "model": "fault-junk"}, timeout=60)
        assert made.status_code == 200, made.text
        chat = f"{url}/task/chat/{made.text}"
        first = httpx.get(chat, params={"message": "Which insects make honey?"}, timeout=60).json()
        assert first["answer"].startswith("No answer could be written (") and first["answered"] is False, first
        follow = httpx.get(chat, params={"message": "How do they make it?"}, timeout=60).json()
    assert follow["standalone_query"] == "How do they make it? (Which insects make honey?)", follow


def test_a_chat_with_a_model_whose_key_is_unset_is_refused_when_it_is_made(make_service, monkeypatch):
    """It was made, and every message then failed with a 422 naming ``steps.answer.params.model`` of a flow 'chat'
    the client never sent."""
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    service = make_service()
    task_id = finished_search(service)
    with api_on_localhost() as url:
        made = httpx.get(f"{url}/task/chat/new", params={"task_id": task_id, "model": "DeepSeekv3"}, timeout=60)
        assert made.status_code == 422, made.text
        error = made.json()["error"]
        assert (error["param"], error["code"]) == ("model", "env_not_set") and "$DEEPSEEK_API_KEY" in error["message"]
        monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-set")
        assert httpx.get(f"{url}/task/chat/new", params={"task_id": task_id, "model": "DeepSeekv3"},
                         timeout=60).status_code == 200


def test_two_messages_answered_at_once_keep_one_turn_and_refuse_the_other(make_service, fault_models):
    """Each was asked with the chat as it was before both, and both were kept as turns 1 and 2, the second as a
    follow-up of an answer it never saw. The one kept second is now a 409 ``chat_busy``, to send again."""
    import concurrent.futures

    fault_models.delay = 1.0  # both messages are being answered at once
    service = make_service()
    task_id = finished_search(service)
    with api_on_localhost() as url:
        made = httpx.get(f"{url}/task/chat/new", params={"task_id": task_id, "model": "fault-slow"}, timeout=60)
        chat = f"{url}/task/chat/{made.text}"
        questions = ["Which insects make honey?", "Where do they live?"]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda q: httpx.post(chat, json={"message": q}, timeout=60), questions))
    assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
    refused = next(a for a in answers if a.status_code == 409).json()["error"]
    assert (refused["param"], refused["code"]) == ("chat_id", "chat_busy")
    [kept] = service.store.task_chats(task_id, "local")
    asked = next(q for q, a in zip(questions, answers) if a.status_code == 200)
    assert [m["role"] for m in kept["messages"]] == ["user", "assistant"] and kept["messages"][0]["content"] == asked
