"""Indices over HTTP: list them and their documents, read one document's passages, add documents (an ingestion task),
share one, delete documents, delete an index; for admin keys, every index, and compacting one (a task).

The rules (who owns an index, one ingestion at a time, what is read-only) are in ``serve.indices.indices``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Iterator

from fastapi import APIRouter, Query, Request, Response

from serve.indices import index_admin
from serve.http import path_text  # noqa: F401  (path_text: the {doc_id:text} convertor)
from serve import service as svc
from serve.indices.documents import DeleteRequest, DocumentsRequest, ShareRequest
from serve.http.errors import ApiError
from serve.indices.index_owner import adding_refused, read_only_names
from serve.runs.param_numbers import MAX_EXACT_INT
from serve.routes.tasks import tenant
from serve.indices.upload_form import UPLOAD_FORM, read_upload

router = APIRouter(tags=["indices"])


@router.get("/v1/indices", summary="The indices a search can name, which of them the caller may change (and why not "
            "the others), the ingest specs a new one may use, and how much one upload may send")
def list_indices(request: Request) -> dict[str, Any]:
    service = svc.current()
    limits = service.limits
    listed = service.indices.listing(tenant(request))
    return {"indices": listed, "read_only": read_only_names(listed, service.default_index),
            "cannot_add": adding_refused(service.indices.folder, service.index_roots),
            "specs": service.indices.specs(),
            "limits": {"max_documents_per_request": limits.max_documents_per_request,
                       "max_body_bytes": limits.max_body_bytes, "max_upload_bytes": limits.max_upload_bytes}}


@router.post("/v1/indices/{name}/documents", status_code=202,
             summary="Add documents to an index (made on first use): an ingestion task; its id")
async def add_documents(name: str, body: DocumentsRequest, request: Request) -> dict[str, Any]:
    service = svc.current()
    queued = await asyncio.to_thread(service.indices.add, name, body, tenant(request))
    await service.launch(queued["task_id"])
    return queued


@router.post("/v1/indices/{name}/files", status_code=202, openapi_extra=UPLOAD_FORM,
             summary="Add PDF, text, Markdown, HTML or CSV files to an index (a PDF: a document per page, a CSV: a "
             "document per row): an ingestion task")
async def add_files(name: str, request: Request) -> dict[str, Any]:
    service = svc.current()
    contents, spec, replace, first_page, first_row = await read_upload(request,
                                                                       service.limits.max_documents_per_request)
    queued = await asyncio.to_thread(service.indices.add_files, name, contents, spec, replace, tenant(request),
                                     first_page, first_row)
    await service.launch(queued["task_id"])
    return queued


@router.get("/v1/indices/{name}/documents", summary="The documents of an index, in the order they were added: "
            "id, title, passages, metadata")
def list_documents(name: str, request: Request,
                   offset: int = Query(0, ge=0, le=MAX_EXACT_INT, description="How many documents to skip (an "
                                       "integer JSON carries exactly: at most 2**53 - 1)."),
                   limit: int = Query(100, ge=1, le=1000, description="How many documents to list (at most 1000)."),
                   ) -> dict[str, Any]:
    from operators.store.errors import ColumnTypeConflictError

    try:
        with damaged_is_409(name):
            return svc.current().indices.documents(name, tenant(request), offset, limit)
    except ColumnTypeConflictError as err:  # shards committed before commits checked column types and values: the
        # index needs repair (the message says how), not the request
        raise ApiError(409, f"index '{name}': {err.detail}", param="name", code="index_type_conflict") from None


@contextlib.contextmanager
def damaged_is_409(name: str) -> Iterator[None]:
    """A doc store file of the index missing or unreadable: the 409 ``index_damaged`` a search of it gets (naming the
    shard, not the server's path), not an opaque 500."""
    from operators.store.errors import IndexCorruptError
    from serve.http.server_paths import without_server_paths

    try:
        yield
    except IndexCorruptError as err:
        raise ApiError(409, f"index '{name}' is damaged: {without_server_paths(err.message)}", param="name",
                       code="index_damaged") from None


@router.get("/v1/indices/{name}/documents/{doc_id:text}", summary="One document of an index with its passages' text, "
            "in order: id, title, metadata, passages (docno, text); the id URL-encoded (it may hold '/')")
def get_document(name: str, doc_id: str, request: Request) -> dict[str, Any]:
    with damaged_is_409(name):
        return svc.current().indices.document(name, doc_id, tenant(request))


@router.post("/v1/indices/{name}/delete", summary="Delete documents by id from an index the caller made")
def delete_documents(name: str, body: DeleteRequest, request: Request) -> dict[str, Any]:
    return svc.current().indices.delete_documents(name, body.ids, tenant(request))


@router.patch("/v1/indices/{name}", summary="Share an index the caller made with every key, or make it private again")
def share_index(name: str, body: ShareRequest, request: Request) -> dict[str, Any]:
    return svc.current().indices.share(name, body.shared, tenant(request))


@router.delete("/v1/indices/{name}", summary="Delete an index the caller made, with its documents")
def delete_index(name: str, request: Request) -> dict[str, Any]:
    return svc.current().indices.delete(name, tenant(request))


@router.get("/v1/admin/indices", summary="Admin keys only: every index the service made, with its owner, also of "
            "keys that were removed")
def list_every_index(request: Request) -> dict[str, Any]:
    return {"indices": index_admin.every_index(svc.current().indices, tenant(request))}


@router.delete("/v1/admin/indices/{name}", summary="Admin keys only: delete an index the service made, whoever owns "
               "it")
def delete_any_index(name: str, request: Request) -> dict[str, Any]:
    return index_admin.delete_any(svc.current().indices, name, tenant(request))


@router.post("/v1/admin/indices/{name}/compact", status_code=202,
             summary="Admin keys only: compact an index the service made (its live passages into few shards): a task; "
             "its id")
async def compact_any_index(name: str, request: Request, response: Response) -> dict[str, Any]:
    service = svc.current()
    queued = await asyncio.to_thread(index_admin.compact_any, service.indices, name, tenant(request))
    await service.launch(queued["task_id"])
    # below the prefix a proxy serves the service under (root_path): the bare path led the client out of it
    queued["progress"] = request.scope.get("root_path", "").rstrip("/") + queued["progress"]
    response.headers["Location"] = queued["progress"]
    return queued
