"""A chat about a task whose result has no rows (an upload's, a search that found nothing) is refused when it is
made, naming ``task_id``: there is nothing to ground its answers on, and each of its messages was a 422 naming a
step of the chat's own flow (``steps.context.inputs``) that the client never wrote. The service's FastAPI app under
uvicorn on 127.0.0.1 with a real SQLite task store; the finished tasks are written as a task worker writes them."""

from __future__ import annotations

import httpx

from tests.serve.conftest import api_on_localhost, finished_search

ROWS = [{"qid": "1", "docno": "bees#0", "title": "Bees", "text": "Honey bees make honey.", "score": 1.0, "rank": 1}]


def test_a_chat_needs_a_task_with_result_rows(make_service):
    service = make_service()
    empty, full = finished_search(service, []), finished_search(service, ROWS)
    with api_on_localhost() as base:
        refused = httpx.get(f"{base}/task/chat/new", params={"task_id": empty}, timeout=30)
        wrong_column = httpx.get(f"{base}/task/chat/new", params={"task_id": empty, "column": "colour"}, timeout=30)
        made = httpx.get(f"{base}/task/chat/new", params={"task_id": full}, timeout=30)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["param"] == "task_id" and error["code"] == "no_result_rows"
    assert error["message"].startswith(f"task {empty} has no result rows to ground a chat on")
    assert wrong_column.status_code == 422 and wrong_column.json()["error"]["param"] == "task_id"
    assert made.status_code == 200 and len(made.text) == 32
