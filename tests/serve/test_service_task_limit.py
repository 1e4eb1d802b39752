"""``limits.max_tasks``: every key's queued and running tasks together. Each task runs in a Ray worker of its own, so
``max_tasks_per_key`` alone let many keys start more than the machine holds (16 at once on a 24 GB machine met Ray's
memory monitor, which killed Serve's controller). A task past it is a 429 with ``Retry-After`` for whichever key sends
it, refused in the task store's insert (``tests/serve/test_taskstore.py`` races it); a key at its own limit is told
that one. A real ``Service`` and SQLite task store, without Ray: nothing here is launched."""

from __future__ import annotations

import asyncio

import pytest

from serve.http.errors import ApiError

BODY = {"flow": "bm25", "query": "honey bees"}


def refused(service, tenant: str) -> ApiError:
    with pytest.raises(ApiError) as err:
        asyncio.run(service.enqueue(BODY, tenant))
    return err.value


def test_a_task_past_the_service_wide_limit_is_a_429_with_retry_after_for_any_key(make_service):
    service = make_service(limits={"max_tasks": 3, "max_tasks_per_key": 2})
    for owner in ("alice", "alice", "bob"):
        service.store.create_task(owner, "bm25", {}, [{"qid": "1", "query": "q"}], ["bm25"])

    err = refused(service, "alice")  # at her own limit too: hers is the one she can act on
    assert (err.status, err.code) == (429, "max_tasks_per_key") and "Retry-After" not in err.headers, err.message
    err = refused(service, "carol")
    assert (err.status, err.code) == (429, "max_tasks"), err.message
    assert err.headers == {"Retry-After": "10"} and "3 tasks queued or running, all keys together" in err.message
    assert service.store.status_counts() == {"queued": 3}  # nothing of either refusal was stored
