"""What the service answers about a run: mosaicRAG's progress object and result, and search hits.

Tables become JSON records; vector columns (lists of floats, binary) are left out of the
records, since a client reads documents, not embeddings, and they would multiply the size.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic_core import to_jsonable_python

from serve.http.server_paths import public_metadata
from serve.tasks.taskstore import FINAL


def _readable(field: pa.Field) -> bool:
    kind = field.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return False
    if pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind) or pa.types.is_large_list(kind):
        return not pa.types.is_floating(kind.value_type)
    return True


def records(table: pa.Table) -> list[dict[str, Any]]:
    """The table's rows as JSON-ready dicts, vector columns left out."""
    keep = [f.name for f in table.schema if _readable(f)]
    return to_jsonable_python(table.select(keep).to_pylist(), fallback=str)


def task_result(result: Any, queries: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """mosaicRAG's ``result``: ``data``, ``result_description``, ``aggregated_data``, ``metadata`` (column roles), and
    ``queries``, the task's (``qid``, ``query``) in order: one that found nothing has no row, and was left out of the
    count and of the web UI's list of the task's queries."""
    table = result.table
    documents = len(set(table.column("docno").to_pylist())) if "docno" in table.column_names else table.num_rows
    answered = len(set(table.column("qid").to_pylist())) if "qid" in table.column_names else 0
    asked = [{"qid": str(q["qid"]), "query": str(q["query"])} for q in queries or []]
    return {
        "data": records(table),
        "result_description": {"documents": documents, "rows": table.num_rows, "queries": max(len(asked), answered),
                               "time": round(result.seconds, 3), "cache_hit_ratio": result.cache_hit_ratio,
                               "text": result.description(len(asked) if asked else None)},
        "aggregated_data": to_jsonable_python(public_metadata(result.metadata), fallback=str),
        "metadata": dict(result.roles),
        "queries": asked,
    }


def progress_body(task: dict[str, Any]) -> dict[str, Any]:
    """mosaicRAG's ``/task/progress`` object for a stored task (plus ``task_id``, ``status`` and ``error``)."""
    steps, status = task["steps"], task["status"]
    done, total = task["steps_done"], len(task["steps"])
    current = task["current_step"]
    index = steps.index(current) if current in steps else min(done, max(total - 1, 0))
    body: dict[str, Any] = {
        "task_id": task["id"],
        "status": status,
        "has_finished": status in FINAL,
        "progress": {
            "current_step": current,
            "current_step_index": index,
            "pipeline_progress": f"{done}/{total}",
            "pipeline_percentage": round(100 * done / total) if total else 100,
            "log": "\n".join(task["log"]),
            "step_output": task["step_progress"].get(current) if current else None,
            "step_progress": task["step_progress"],
        },
    }
    if task["error"]:
        body["error"] = task["error"]
    if "outcome_stored" in task:  # failed, and not in the task store yet (``serve.tasks.unstored``)
        body["outcome_stored"] = task["outcome_stored"]
    if status == "finished":
        body["result"] = task["result"]
    return body


def search_hits(result: Any, queries: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Per query, in request order: its hits best first, and its metadata."""
    rows = records(result.table)
    by_qid: dict[str, list[dict[str, Any]]] = {q["qid"]: [] for q in queries}
    for row in rows:
        if row.get("docno") is not None:  # a query's own row (a flow that answers without search) is no hit
            by_qid.setdefault(str(row.get("qid")), []).append(row)
    for hits in by_qid.values():
        hits.sort(key=lambda r: (r.get("rank") is None, r.get("rank") or 0))
    metadata = to_jsonable_python(result.metadata, fallback=str)
    return [{"qid": q["qid"], "query": q["query"], "hits": by_qid.get(q["qid"], []),
             "metadata": metadata.get(q["qid"], {})} for q in queries]
