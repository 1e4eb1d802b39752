"""Running a prepared flow in this replica (the online path of ``/v1/search`` and of chats), and the HTTP error each
failure of the run answers as.

Why apart from the routers: both ``routes.search`` and ``chat.chat_flows`` run flows here, and only ``serve.api``
imports the routers.
"""

from __future__ import annotations

from typing import Any

from serve import service as svc
from serve.http.errors import UNAVAILABLE_RETRY_AFTER_S, ApiError


def queries_table(prepared: svc.Prepared, columns: dict[str, list[Any]] | None = None) -> Any:
    """A flow's input: its queries (``qid``, ``query``) and any query ``columns``, a value per query."""
    import pyarrow as pa

    return pa.table({"qid": pa.array([q["qid"] for q in prepared.queries], pa.string()),
                     "query": pa.array([q["query"] for q in prepared.queries], pa.string()), **(columns or {})})


def run_online(prepared: svc.Prepared, table: Any = None, cancel: Any = None) -> Any:
    """Run a prepared flow here, on the local executor, over ``table`` (default: its queries); the result, or a
    413 when it holds more rows than ``max_result_rows``. ``cancel`` (a ``CancelToken``) stops it between
    batches and the embedded model between tokens."""
    from flows.executors import make_executor
    from flows.placement import PlacementError, PlacementMismatch
    from operators.errors import MissingColumnsError, SpecError, StepFailed, in_chain
    from operators.filters import FilterError
    from operators.outbound import OutboundURLError
    from operators.store import IndexNotFoundError, IndexStoreError
    from operators.store.errors import ColumnTypeConflictError, IndexCorruptError
    from serve.http.server_paths import public_metadata, without_server_paths

    table = queries_table(prepared) if table is None else table
    try:
        result = make_executor("local", keep_history=False).run(prepared.flow, table, cancel=cancel)
    except PlacementMismatch as err:  # a deployment that runs another model than the step asks for: the request's
        raise ApiError(422, without_server_paths(str(err)), param=err.field or "placement",
                       code="flow_not_runnable") from None
    except PlacementError as err:  # a deployment of this app that has no replica yet, or lost its last one
        raise ApiError(503, without_server_paths(str(err)), kind="server_error", code="deployment_unavailable",
                       headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER_S)}) from None
    except Exception as err:
        step, deleted = getattr(err, "step", None), in_chain(err, IndexNotFoundError) is not None
        if not deleted and in_chain(err, (IndexStoreError, OSError)) is not None:
            # a shard's files gone while they were read: the index moved aside (deleted) meanwhile, if its manifest
            # went too; a damaged index that is still there is the 409 below
            gone = _deleted(prepared)
            deleted, step = gone is not None, gone or step
        if deleted:  # deleted once the flow was checked (a retriever wraps the error)
            raise ApiError(404, f"index: {_searched(prepared, step)} does not exist any more "
                           "(it was deleted while the flow ran)", param="index", code="index_not_found") from None
        if (conflict := in_chain(err, ColumnTypeConflictError)) is not None:  # shards whose rows cannot be read
            # into one table (committed before commits checked their types and values): the index needs repair,
            # which the message says how, not the request
            raise ApiError(409, f"{_searched(prepared, getattr(err, 'step', None))}: {conflict.detail}",
                           param="index", code="index_type_conflict") from None
        if (corrupt := in_chain(err, IndexCorruptError)) is not None:  # a shard's file missing, cut short or changed
            # on disk: every search of that index fails until it is restored or rebuilt (docs/indices.md), while the
            # other indices answer. Like a type conflict, the index needs repair, not the request; an opaque 500
            # told the client nothing of which index or why
            raise ApiError(409, f"{_searched(prepared, getattr(err, 'step', None))} is damaged: "
                           f"{without_server_paths(corrupt.message)}", param="index", code="index_damaged") from None
        if (refused := in_chain(err, OutboundURLError)) is not None and step is not None and refused.field:
            # a URL the guard refuses once the step looked its host up (a name that resolves to loopback): the
            # step's field, where the flow's failure policy (on_error: error) had made it a 500
            raise ApiError(422, without_server_paths(str(err)), param=f"steps.{step}.params.{refused.field}",
                           code="flow_not_runnable") from None
        if isinstance(err, StepFailed):  # the flow asked to fail on a model's or a service's failure: it did
            raise ApiError(502, without_server_paths(str(err)), param=f"steps.{step}" if step else "flow",
                           kind="server_error", code="step_failed") from None
        if isinstance(err, (SpecError, MissingColumnsError, OutboundURLError, FilterError)):
            # found only once it ran: a step without the columns it reads (generate.answer with no context step), a
            # URL the guard refuses, a filter on a column the index or rows lack or of another type. The request's
            # to change, so a 422 naming it; any other failure of a step (a model's) stays a 500.
            raise ApiError(422, without_server_paths(str(err)), param=_steps_field(err, prepared),
                           code="flow_not_runnable") from None
        if (param := _refused_param(err, prepared)) is not None:  # a value of its params, refused once it ran (a
            # corpus file that is not there): the request's too, where a 500 said the server failed
            raise ApiError(422, without_server_paths(str(err)), param=param, code="flow_not_runnable") from None
        raise
    result.metadata = public_metadata(result.metadata)  # a step's failure, as chats and searches answer it
    limit = svc.current().limits.max_result_rows
    if result.table.num_rows > limit:
        raise ApiError(413, f"the result has {result.table.num_rows} rows, over the limit max_result_rows={limit}",
                       code="max_result_rows")
    return result


def _steps_field(err: Exception, prepared: svc.Prepared) -> str:
    """The request's field an error of a step names: ``params.filter`` of step ``b`` as ``steps.b.params.filter`` (two
    filtered steps were otherwise the same ``params.filter``); a field of no step of the spec as it is."""
    field, step = getattr(err, "field", None) or "flow", getattr(err, "step", None)
    if step in prepared.spec.steps and field.startswith("params."):
        return f"steps.{step}.{field}"
    return field


def _refused_param(err: Exception, prepared: svc.Prepared) -> str | None:
    """The field of the request's flow (``steps.<id>.params.<name>``) whose value a step refused once it ran: an
    ``OperatorError`` of the step's own operator naming one of its params (``retrieve.corpus_bm25``'s corpus that
    does not exist, or is a folder), or a ``SourceError`` of a source the step reads its one local file with (a
    corpus that is not JSONL). None for any other failure: one that names no param (a model's, a bug's) or a param
    of no step of the spec (a nested operator's), and the index store's, answered above or a 500."""
    from operators.errors import OperatorError, SourceError, in_chain
    from operators.local_files import local_path_params
    from operators.registry import get_operator
    from operators.store import IndexStoreError

    step = prepared.spec.steps.get(getattr(err, "step", None) or "")
    if not isinstance(err, OperatorError) or step is None or in_chain(err, IndexStoreError) is not None:
        return None
    field = err.field or ""
    if err.op == step.op and field.startswith("params."):
        return f"steps.{err.step}.{field}"
    files = list(local_path_params(get_operator(step.op).Params))
    if isinstance(err, SourceError) and len(files) == 1:
        return f"steps.{err.step}.params.{files[0]}"
    return None


def _deleted(prepared: svc.Prepared) -> str | None:
    """The first step of the flow that names an index with no manifest any more (deleted while the flow ran: its
    shards' files went while they were read), None when every index it names is there."""
    from pathlib import Path

    from serve.indices.index_roots import index_params

    return next((step for step, _, index in index_params(prepared.spec)
                 if not (Path(index) / "manifest.json").exists()), None)


def _searched(prepared: svc.Prepared, step: str | None) -> str:
    """What a message calls the index that ``step`` searches: its name (not the server's path)."""
    from pathlib import Path

    index = prepared.spec.steps[step].params.get("index") if step in prepared.spec.steps else None
    where = f" that step '{step}' searches" if step else ""
    return f"index '{Path(index).name}'{where}" if isinstance(index, str) else f"the index{where}"
