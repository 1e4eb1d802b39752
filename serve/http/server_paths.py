"""What a client of the service reads of a failure that happened while its flow ran: the message without this
machine's paths.

A refusal (a 4xx) is worded for the client where it is raised; a failure inside a step is not: a model that does
not load says ``config file at '/srv/.tessera/models/m/config.json'``, llama.cpp says ``Failed to load model from
file: /srv/llm/x.gguf``, a damaged index names its shard folder. Such a message reaches a client as a task's
``error`` and log, a query's ``degraded`` reason (task results, searches, chat answers) and a run's 4xx, and would
tell it the server's layout: its home, its user, where the virtualenv is. So the service words each with every
absolute path by its last part (``config.json``, ``x.gguf``) and ``$TESSERA_HOME`` for the home; the server's log
keeps the message as it was (``Operator.degrade`` logs each reason, the task store each failure).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from operators.home import tessera_home

#: A character of a path part: not a separator, quote, bracket or space, nor ``:`` (``/a/b: cannot read``).
_PART = r"[^/\s'\"`,;:()\[\]{}<>|]"
#: An absolute path (``/a/b``, ``~/a``, ``file:///a``, the ``//a/b`` of ``tessera//a/b``) not inside a word or URL
#: (``http://host/a``, ``and/or``), or a path under the home, ``$TESSERA_HOME/a/b`` once the home is named so.
#: The service's own routes, which a refusal names as what to ask instead (``GET /v1/indices lists the indices``),
#: are left as they are.
_ROUTE = r"/(?:v1|v2|task|tasks|flows|healthz|ui)(?![^/\s'\"`,;:()\[\]{}<>|])"
_ABSOLUTE = re.compile(rf"(?:(?<![\w.:~$\]-])(?<!:/)(?:file://|~)?(?!{_ROUTE})|\$TESSERA_HOME)((?:/{_PART}+)+/?)")


def without_server_paths(text: str) -> str:
    """``text`` with ``$TESSERA_HOME`` for the home and each absolute path by its last part (module docstring)."""
    home = tessera_home()
    for root in sorted({str(home), str(home.resolve())}, key=len, reverse=True):
        if len(root) > 1:
            text = re.sub(re.escape(root) + r"(?![^/\s'\"`,;:()\[\]{}<>|])", "$TESSERA_HOME", text)
    return _ABSOLUTE.sub(lambda match: Path(match.group(1)).name, text)


def public_metadata(metadata: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A run's per-query metadata with each ``degraded`` reason (a step's failure, as its log line has it) worded
    without server paths; the rest (answers, sources: the flow's output) as it is."""
    public = {}
    for qid, meta in metadata.items():
        degraded = meta.get("degraded") if isinstance(meta, dict) else None
        if isinstance(degraded, dict) and isinstance(degraded.get("reason"), str):
            meta = {**meta, "degraded": {**degraded, "reason": without_server_paths(degraded["reason"])}}
        public[qid] = meta
    return public
