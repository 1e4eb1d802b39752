"""The first request should not pay for the replica's imports and loads: a warm-up on a daemon thread.

Without it the first ``/v1/search`` took 6.2 s in the server against 32 ms warm: importing
sentence-transformers (torch), loading the default index's encoder and opening the index's
BM25 and vectors. The warm-up does the imports a task and a search need, then builds the
default search flow over the default index and sets up each of its steps that runs in this
replica (a step placed on a model deployment is left alone: setting it up here would load
its model twice, and calling it would wake a deployment scaled to zero). It never blocks the
replica's start or its readiness, and a failure is logged, not raised.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from operators.errors import OperatorError, SpecError
from serve.tasks import taskrunner
from serve.security.auth import LOCAL_TENANT
from serve.http.errors import ApiError

log = logging.getLogger("tessera.serve")


def warm_up(service: Any) -> None:
    """Import and load what the first search of ``service`` (a ``serve.service.Service``) would."""
    started = time.perf_counter()
    taskrunner.warm_up()
    index = service.default_index
    if service.default_index_missing():  # a search naming no index fails until it is made
        log.warning("tessera serve: the default index %s holds no index (yet): searches that name none fail until "
                    "it is ingested (tessera ingest --source FILE --index %s) or args.service.default_index names "
                    "another", index, index)
    elif index:
        prepared = service.prepare({"query": "warm-up", "top_k": 1}, LOCAL_TENANT, search=True)
        for step in prepared.steps:
            if prepared.spec.steps[step].placement is None:
                prepared.flow.operators[step].ensure_setup()
    log.info("tessera serve: warmed up in %.1f s", time.perf_counter() - started)


def _warm_up_logged(service: Any) -> None:
    try:
        warm_up(service)
    except ApiError as refused:  # the service's own refusal (a default index private to one key): what it says
        log.warning("tessera serve: the warm-up could not search the default index %s, nor will the searches of "
                    "keys other than its owner that name no index: %s", service.default_index, refused.message)
    except (OperatorError, SpecError) as err:  # the default flow cannot run over the default index (one without
        # vectors under hybrid, refused before it runs; a damaged one): what a search would be told, in one line
        log.warning("tessera serve: the warm-up could not set up the default search over %s, nor will searches that "
                    "name no flow: %s", service.default_index, err)
    except Exception:  # noqa: BLE001  (the first request then does it, and names its own error)
        log.warning("tessera serve: the warm-up failed; the first request loads what it needs", exc_info=True)


def start(service: Any) -> threading.Thread:
    """Warm ``service`` up on a daemon thread (a replica that stops does not wait for it)."""
    thread = threading.Thread(target=_warm_up_logged, args=(service,), name="tessera-warm-up", daemon=True)
    thread.start()
    return thread
