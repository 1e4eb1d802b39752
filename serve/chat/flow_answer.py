"""A flow's run for a chat and its reply: ``flow_result`` runs the prepared flow here (a failure it causes is the 4xx
of ``run_online``, any other a 500 naming the flow), ``message`` makes the assistant's reply to one query of it: the
answer, its numbered references as ``sources``, the usage and the marks a client reads (``answered``, ``abstained``,
``documents``). serve/chat/chat_flows.py answers with one; serve/chat/flow_choices.py with ``n`` of one search.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from flows.progress import CancelToken
from operators.conversation import NOT_WRITTEN
from operators.errors import FlowCancelled
from serve import service as svc
from serve.http import errors
from serve.http.errors import ApiError
from serve.runs.online import run_online


def flow_result(prepared: svc.Prepared, table: pa.Table, cancel: CancelToken | None = None) -> Any:
    """The prepared flow run over ``table`` (``cancel`` stops it): its result."""
    try:
        return run_online(prepared, table, cancel)
    except (ApiError, FlowCancelled):
        raise
    except Exception as err:  # noqa: BLE001  (the flow failed: named, details in the log)
        raise errors.server_error(f"flow '{prepared.spec.name}'", err, code="flow_error") from None


def message(table: pa.Table, meta: dict[str, Any], qid: str) -> dict[str, Any]:
    """The reply to the query ``qid``, from the flow's result ``table`` and the query's metadata ``meta``: the
    assistant message, the answer, whether it is one, its finish reason and usage."""
    answer = (meta.get("answer") or "").strip()
    answered = bool(answer)
    sources = _sources(table, meta, qid) if answered else []  # none under a non-answer: they support nothing
    if not answered:  # the degraded mark's reason, in words (not the mark's dict: {'step': ..., 'reason': ...})
        degraded = meta.get("degraded")
        reason = degraded.get("reason") if isinstance(degraded, dict) else degraded
        found = "qid" in table.column_names and qid in set(table.column("qid").to_pylist())
        reason = reason or ("the flow wrote no answer" if found else "the search found no document for it: is the "
                            "index empty, or filtered to nothing?")
        answer = f"{NOT_WRITTEN} ({reason})."
    content = answer + ("\n\nSources:\n" + "\n".join(s["reference"] for s in sources) if sources else "")
    reply: dict[str, Any] = {"role": "assistant", "content": content, "sources": sources}
    if meta.get("degraded"):
        reply["degraded"] = meta["degraded"]
    if meta.get("standalone_query"):  # a follow-up, searched for with its conversation (query.contextualize)
        reply["standalone_query"] = meta["standalone_query"]
    if meta.get("abstained"):  # no document was close enough (min_relevance): the no-answer text, no model call
        reply["abstained"] = True
    # none for an answer written from the question alone (answer_only): its empty sources are not an uncited answer's
    reply["documents"] = _documents(table, qid)
    if not answered:  # "No answer could be written (...)": a client leaves it out of the conversation it sends back
        reply["answered"] = False
    prompt = completion = 0
    for usage in (meta.get("usage") or {}).values():
        if isinstance(usage, dict):
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
    finish = "length" if meta.get("answer_cut") else "stop"  # max_tokens cut the answer (not only what followed it)
    return {"message": reply, "answer": answer, "answered": answered, "finish_reason": finish,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def _documents(table: pa.Table, qid: str) -> int:
    """How many documents the flow found for the question: the rows of its result with a ``docno``."""
    if not {"qid", "docno"} <= set(table.column_names):
        return 0
    found = table.filter(pc.equal(table.column("qid"), qid))
    return found.num_rows - found.column("docno").null_count


def _sources(table: pa.Table, meta: dict[str, Any], qid: str) -> list[dict[str, Any]]:
    """The answer's numbered references as records: from the ``reference`` column (generate.references) of the
    query's rows (a table of ``n`` choices holds each one's), else the cited docnos in the metadata."""
    from serve.tasks.results import records

    rows = [row for row in records(table) if row.get("reference") and row.get("qid", qid) == qid]
    if rows:
        rows.sort(key=lambda row: row.get("context_index") or 0)
        return [{"number": row.get("context_index"), "docno": row.get("docno"), "reference": row["reference"],
                 **{key: row[key] for key in ("title", "url") if row.get(key)}} for row in rows]
    return [{"number": i + 1, "docno": docno, "reference": f"[{i + 1}] {docno}"}
            for i, docno in enumerate(meta.get("sources") or [])]
