"""``/healthz``'s checks of the flow routes (the task store answers ``SELECT 1``, ``$TESSERA_HOME`` is writable) answer
at once while every thread of the event loop's default pool is taken, as the requests' flows take them (a search, a
chat waiting on its model's stream). Before, the checks queued behind those flows: with six streamed chats on a
2-core replica ``/healthz`` took 6 s, and a store check that waited past its 2 s said the store did not answer.

A real SQLite task store and real threads: the loop's default pool filled with calls that wait until released."""

from __future__ import annotations

import asyncio
import threading

from serve.health import service_readiness


def test_the_flow_routes_health_checks_answer_while_the_default_threads_are_busy(make_service):
    service = make_service()

    async def checked_while_busy() -> list[str]:
        release = threading.Event()
        busy = [asyncio.ensure_future(asyncio.to_thread(release.wait, 60)) for _ in range(40)]  # over any pool's 32
        await asyncio.sleep(0.2)
        try:
            # the busy threads end only once it answered: queued behind them, it would time out
            return await asyncio.wait_for(service_readiness(service), 10)
        finally:
            release.set()
            await asyncio.gather(*busy)

    assert asyncio.run(checked_while_busy()) == []
