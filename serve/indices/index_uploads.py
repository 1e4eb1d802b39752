"""Documents added to an index over HTTP (``Indices.add``, ``add_files``): an upload checked, written and queued.

Why a module of its own: an upload's checks and queueing (the index deleted or made by another upload while it
is checked, its file removed when it is refused) change for reasons of their own, apart from who may read and
change an index (``serve.indices.indices``, whose ``Indices`` inherits them from ``Uploads``).
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from serve.indices.documents import DocumentsRequest, files_request, given_once, sent_as_files, write_jsonl
from serve.http.errors import ApiError
from serve.indices.index_owner import OwnerFile
from serve.indices.index_reading import mixed_kind_warnings, refuse_against_index, refuse_many_keys
from serve.tasks.ingest_task import STEPS

#: How many times an upload is checked again when its index is deleted or made meanwhile (``Indices.add``).
CHANGED_TRIES = 3


class _IndexChanged(Exception):
    """The index an upload checked was deleted, or made by another upload, before the upload was queued."""


class Uploads:
    """``Indices``' uploads: the documents of a request, or of files, checked and queued as an ingestion task."""

    def add(self, name: str, request: DocumentsRequest, tenant: str, files: list[str] | None = None,
            warnings: list[str] = ()) -> dict[str, Any]:
        """Check the documents and the ingestion, write them for the task, queue it; the task's id, and ``warnings``
        (the files' and the documents'). ``files``: the names of the uploaded files the documents came from (replacing
        one replaces all it gave before). The index may be deleted, or made by another upload, while this one is
        checked: the task store then refuses to queue it (``create_ingest_task``'s ``seen``), and it is checked again
        against the index as it is now, so an upload accepted after a delete makes the index anew with its documents."""
        limit = self.service.limits.max_documents_per_request
        if len(request.documents) > limit:
            raise ApiError(422, f"{len(request.documents)} documents, over the limit max_documents_per_request="
                           f"{limit}; send them in several requests", param="documents",
                           code="max_documents_per_request")
        given_once(request.documents)
        for _ in range(CHANGED_TRIES):
            try:
                queued = self._add(name, request, tenant, files)
                said = [*warnings, *mixed_kind_warnings(request.documents)]  # the client's to read, not the log's
                return {**queued, "warnings": said} if said else queued
            except _IndexChanged:
                continue
        raise ApiError(409, f"index '{name}' was deleted or made by other requests while this upload was checked, "
                       f"{CHANGED_TRIES} times; send it again", param="name", code="index_busy")

    def _add(self, name: str, request: DocumentsRequest, tenant: str, files: list[str] | None) -> dict[str, Any]:
        """``add`` against the index as it is now; ``_IndexChanged`` when it changed before the task was queued."""
        from flows.ingestion import check_ingest
        from flows.ingestion.staging import staging_dir
        from operators.errors import TesseraError

        path, row = self._writable(name, tenant)
        self._refuse_busy(name, row)  # checked again below: one may start while this upload is checked
        seen = row["created"] if row is not None else None  # the task is queued only if the index is still this one
        spec = self._spec(request.spec, row)
        keys = self.service.limits.max_metadata_keys
        if (path / "manifest.json").exists():  # ids already there (409), metadata its columns cannot take (422)
            refuse_against_index(path, request.documents, request.replace, from_files=files is not None,
                                 max_keys=keys)
        else:
            refuse_many_keys(request.documents, [], keys, from_files=files is not None)
        source = self.uploads / name / f"{uuid.uuid4().hex}.jsonl"
        new_folder = not source.parent.exists()
        source.parent.mkdir(parents=True, exist_ok=True)
        try:  # a refused upload leaves neither its file nor the folder it made (nothing else would remove it)
            try:
                write_jsonl(source, request.documents)
            except FileNotFoundError:  # the index was deleted since the folder was made: its uploads went with it
                raise _IndexChanged() from None
            try:
                placed = self._placed(spec, path)
                checked = check_ingest(str(source), str(path), spec=placed, executor="local")
            except TesseraError as err:
                if self._changed(name, seen):  # the index (or the file) went while it was checked
                    raise _IndexChanged() from None
                self._refuse_busy(name, self.service.store.index(name))  # one started meanwhile: not the upload's fault
                from operators.models.references import ModelNotFoundError
                from serve.runs.flow_request import public_text

                # the documents are this server's own JSONL: what is refused is the spec, or a model it names
                spec_made_it = err.field or isinstance(err, ModelNotFoundError)
                raise ApiError(422, f"this upload cannot be ingested: {public_text(err)}",
                               param="spec" if spec_made_it else None, code="ingest_refused") from None
            job = {"ingest": {"index": name, "index_path": str(path), "source": str(source),
                              "staging": str(staging_dir(checked.plan.read, path)), "spec": placed,
                              "replace": request.replace, "compact_after_shards": self.compact_after_shards,
                              "replace_files": list(files or []) if request.replace else []},
                   "documents": len(request.documents)}
            owner = OwnerFile(path, tenant)
            with self.service.spares.lend() as lent, owner.undone_unless_queued():
                task_id, why = self.service.store.create_ingest_task(
                    tenant, name, spec, job, STEPS, task_id=lent.task_id, limit=self.service.limits.max_tasks_per_key,
                    total=self.service.limits.max_tasks, seen=seen, on_row=owner.write)
                lent.made = task_id is not None
            if why == "changed":
                raise _IndexChanged()
            if task_id is None:
                raise self._refusal(name, why)
            if not source.is_file():  # a delete of an index already gone (its row) took it before the queueing
                source.parent.mkdir(parents=True, exist_ok=True)  # queued: no delete takes it now
                write_jsonl(source, request.documents)
        except BaseException:
            source.unlink(missing_ok=True)
            if new_folder:
                with contextlib.suppress(OSError):  # not empty: another upload's file is in it now
                    source.parent.rmdir()
            raise
        return {"task_id": task_id, "index": name, "documents": len(request.documents), "spec": spec,
                "created": row is None}

    def _changed(self, name: str, seen: float | None) -> bool:
        """Whether index ``name`` is no longer the one an upload checked (``seen``: its row's ``created``, None for
        none): deleted, or made by another upload."""
        row = self.service.store.index(name)
        return (row["created"] if row is not None else None) != seen

    def add_files(self, name: str, files: list[tuple[str, bytes]], spec: str | None, replace: bool,
                  tenant: str, first_page: int | None = None, first_row: int | None = None) -> dict[str, Any]:
        """``add`` for files: a PDF gives a document per page with text (from ``first_page``: a part of it), a text,
        Markdown or HTML file one document, a CSV file one a row with a text (from ``first_row``: a part of it);
        ``warnings`` say how a file was read."""
        request, whole, warnings = files_request(files, spec, replace, first_page, self.service.limits, first_row)
        with sent_as_files():
            return self.add(name, request, tenant, files=whole, warnings=warnings)
