"""Whether this service can run a flow, and why not: the one rule behind ``GET /flows``'s ``status`` (the web UI's
Search tab) and ``GET /v1/models``'s answering flows (chat).

The rule is the check every request's flow passes before it runs (``Service.checked_flow``, its steps placed on
this app's deployments): a param left unset (``rag_gold``'s dataset, which ``tessera bench`` fills in), a model
that is neither served here nor on this machine, an environment variable not set, a step the spec guard refuses.
It is checked without an index, since a request may name any: the index's own checks come with the request.
"""

from __future__ import annotations

import functools
from typing import Any

from operators.errors import TesseraError
from serve import service as svc
from serve.errors import ApiError
from serve.service import FlowFile


def flow_problem(name: str, tenant: str, now: tuple[Any, ...]) -> str | None:
    """Why this service would refuse flow ``name`` for a query, in the words of that refusal; None when it runs it.
    ``now``: ``versions()``, read once by a caller that asks of many flows."""
    service = svc.current()
    try:
        file = service.flow_file(name, tenant)
        if file is None:
            service.resolve_flow(name, tenant)  # raises: no flow of that name
    except TesseraError as err:
        return str(err)
    return file_problem(service, file, now)


@functools.lru_cache(maxsize=1024)
def file_problem(service: svc.Service, file: FlowFile, now: tuple[Any, ...]) -> str | None:
    """``flow_problem`` for one version of a flow's file and of what the check reads besides it (``now``,
    ``versions()``): building, placing and checking the 29 built-in flows took about 250 ms a call, kept here at a
    few stats."""
    try:
        service.checked_flow(service.place(svc.load_spec(file)), ["a query"])
    except (TesseraError, ApiError) as err:
        return str(err)
    return None


def versions() -> tuple[Any, ...]:
    """The version of what a flow's check reads besides its file and the app's fixed deployments: each models file
    (the packaged one, the user's: ``$TESSERA_MODELS`` or ``$TESSERA_HOME/models.yaml`` can be edited while the app
    serves) and the model repository's folder (a model trained meanwhile), by path, mtime, size and inode."""
    from operators.llm.aliases import PACKAGED_FILE, user_file
    from operators.models.references import models_dir

    found = []
    for path in (PACKAGED_FILE, user_file(), models_dir()):
        try:
            stat = path.stat() if path is not None else None
        except OSError:
            stat = None
        found.append((str(path), *((stat.st_mtime_ns, stat.st_size, stat.st_ino) if stat is not None else (None,))))
    return tuple(found)
