"""Indices made over HTTP: documents in (an ingestion task on Ray), documents and whole indices out.

A client sends documents as JSON (``POST /v1/indices/{name}/documents``). The replica checks
the body and the ingestion it asks for (ids given once and not already in the index, the
index's encoder on this machine), writes the documents to a JSONL file under
``$TESSERA_HOME/uploads/<name>/`` and queues an ingestion task (``serve.ingest_task``), which
the task API follows like any other. The index is ``$TESSERA_HOME/indices/<name>``, where a
search finds it by ``index: <name>``.

Who may change what:

* the key that made an index owns it, and only that key adds documents to it, deletes
  documents from it or deletes it;
* only its owner searches it, lists it and reads its documents until the owner shares it with
  every key (``PATCH /v1/indices/{name}``, ``refuse_unshared``);
* an index the service did not make (the default index, one that ``tessera ingest`` built) is
  searchable by every key and read-only here; the service knows the indices it made by their row
  in the task store and by the owner file in their folder (``serve.index_owner``), so a store
  that lost its rows does not make them everyone's;
* one ingestion runs at a time per index (a second upload is a 409 naming the running task),
  and an upload is one shard, so its documents land together or not at all.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from flows import store as flow_store
from operators.errors import one_line
from serve.documents import DocumentsRequest, files_request, given_once, sent_as_files, write_jsonl
from serve.errors import ApiError, index_refusal
from serve.index_reading import (EMPTY, deleted_meanwhile, describe, live_doc_ids, mixed_kind_warnings, open_index,
                                 refuse_against_index)
from serve.index_owner import (DEFAULT_READ_ONLY, NOT_MADE_HERE, OWNER_FILE, adding_refused, check_named,
                               default_names, index_holding, read_owner, readable, unshared, write_owner)
from serve.ingest_task import STEPS, move_folder_aside
from serve.served_models import placed_ingest_spec
from serve.taskstore import UNFINISHED

#: How many times an upload is checked again when its index is deleted or made meanwhile (``Indices.add``).
CHANGED_TRIES = 3

#: Index names: one folder name, no path.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class _IndexChanged(Exception):
    """The index an upload checked was deleted, or made by another upload, before the upload was queued."""


def ingest_specs() -> list[str]:
    """The built-in ingest specs (an upload may name those whose models are here: ``Indices.specs``)."""
    return [name for name in flow_store.builtin_names() if name.startswith("ingest")]


class Indices:
    """The indices half of one replica's service: where they live, and what a key may do to them."""

    def __init__(self, service: Any):
        self.service = service
        self.folder = Path(service.home) / "indices"
        self.uploads = Path(service.home) / "uploads"
        #: An upload that leaves its index with more shards compacts it (0: never); ``args.service``'s.
        self.compact_after_shards = service.compact_after_shards

    # -- reading ------------------------------------------------------------------------------

    def listing(self, tenant: str) -> list[dict[str, Any]]:
        """The indices a search can name, each with its size and settings, and whether ``tenant`` may change it."""
        made = self.service.store.indices_made()
        default = Path(self.service.default_index) if self.service.default_index else None
        paths = [default] if default else []
        if self._searchable():
            paths += [manifest.parent.resolve() for manifest in sorted(self.folder.glob("*/manifest.json"))]
        folder, entries = self.folder.resolve(), []
        for path in dict.fromkeys(paths):
            entry = describe(path)
            if entry is None:
                continue
            name = path.name if path.parent == folder else None  # None: the default index, outside the folder
            row = (made.get(name) or read_owner(path)) if name else None
            if not readable(row, tenant):
                continue
            entries.append({"name": name, "default": path == default, **entry, **_ownership(row, tenant)})
        listed = {e["name"] for e in entries}
        for name, row in made.items():  # new indices whose first ingestion has not committed yet: the caller's, shared
            if name not in listed and readable(row, tenant):
                entries.append({"name": name, "default": False, **EMPTY, **_ownership(row, tenant)})
        return entries

    def specs(self) -> list[dict[str, Any]]:
        """Each built-in ingest spec with its description, and why it cannot make an index here (its model is
        missing), else None."""
        from flows.ingestion.plan import build_plan, embed_params, index_settings, require_models
        from flows.spec import FlowSpec
        from operators.errors import TesseraError

        result = []
        for name in ingest_specs():
            flow = FlowSpec.load(name)
            plan = build_plan(flow.to_dict(), None, None)
            try:
                require_models(embed_params(plan, index_settings(self.folder / ".none", None, plan.settings_base)),
                               None)
                missing = None
            except TesseraError as err:
                from serve.flow_request import public_text

                missing = public_text(err)  # as the upload's refusal says it: no folder of the server
            result.append({"name": name, "description": " ".join(flow.description.split()),
                           "missing": missing})
        return result

    def documents(self, name: str, tenant: str, offset: int, limit: int) -> dict[str, Any]:
        """The documents of index ``name`` in the order they were added, ``limit`` from ``offset``: id, title,
        passages, metadata."""
        from operators.store.listing import document_page

        index = self.readable_index(name, tenant)
        if index is None:
            return {"index": name, "total": 0, "offset": offset, "documents": []}
        with deleted_meanwhile(index.path, name):
            return {"index": name, "offset": offset, **document_page(index, offset, limit)}

    def document(self, name: str, doc_id: str, tenant: str) -> dict[str, Any]:
        """One document of index ``name`` with its passages (``serve.index_documents``)."""
        from serve.index_documents import document

        index = self.readable_index(name, tenant)
        with deleted_meanwhile(self.folder / name, name):
            return document(index, name, doc_id)

    def readable_index(self, name: str, tenant: str) -> Any:
        """Index ``name`` when ``tenant`` may search it, and so read its documents (a 403 for another key's private
        one, a 404 when there is none); None for one it may read whose first ingestion has not committed yet (its own,
        or one its owner shared: no documents, as a search of it says, not "no index")."""
        path, row = self.named(name)
        row = row or read_owner(path)
        if not readable(row, tenant):
            raise unshared(name, "name")
        index = open_index(path) if self._searchable() else None
        if index is None and row is not None:  # its first upload has not committed, or it was deleted meanwhile
            row = self.service.store.index(name) or read_owner(path)
        if index is None and (row is None or not readable(row, tenant)):
            raise ApiError(404, f"no index named '{name}'", param="name", code="index_not_found")
        return index

    def refuse_unshared(self, spec: Any, tenant: str, asked: str | None) -> None:
        """A 403 naming the field (the request's ``index``, else the step's param) for an index of ``spec`` that
        another key made and has not shared, a 409 for one the service made that has no documents yet. ``spec``'s
        indices are confined already: absolute paths. Reads the task store's rows of those indices only, in one
        query (none when it names no index the service made)."""
        from serve.index_roots import confine, index_params

        asked_path = confine(asked, self.service.index_roots, "index") if asked else None
        named = [(step, field, value, top) for step, field, value in index_params(spec)
                 if (top := index_holding(self.folder, Path(value))) is not None]
        if not named:
            return
        made = self.service.store.indices_made({top.name for *_, top in named})
        for step, field, value, top in named:
            check_named(top, made.get(top.name) or read_owner(top), tenant,
                        "index" if value == asked_path else f"steps.{step}.{field}")

    def check_asked(self, path: Path, tenant: str) -> None:
        """The request's ``index`` (confined), before the flow is checked for it: a 403 when another key made it and
        has not shared it, a 409 when the service made it and its first upload has not committed, so neither is
        reported as a folder that holds no index."""
        if (top := index_holding(self.folder, path)) is not None:
            check_named(top, self.service.store.index(top.name) or read_owner(top), tenant, "index")

    # -- changing -------------------------------------------------------------------------------

    def share(self, name: str, shared: bool, tenant: str) -> dict[str, Any]:
        """Let every key search the caller's index ``name`` (``shared``), or only the caller."""
        path, _ = self._owned(name, tenant)
        if not self.service.store.share_index(name, tenant, shared, lambda row: write_owner(path, row)):
            raise ApiError(404, f"no index named '{name}' made through this service", param="name",
                           code="index_not_found")
        return {"index": name, "shared": shared}

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
        if (path / "manifest.json").exists():  # ids already there (409), metadata its columns cannot take (422)
            refuse_against_index(path, request.documents, request.replace, from_files=files is not None)
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
                from serve.flow_request import public_text

                # the documents are this server's own JSONL: what is refused is the spec, or a model it names
                spec_made_it = err.field or isinstance(err, ModelNotFoundError)
                raise ApiError(422, f"this upload cannot be ingested: {public_text(err)}",
                               param="spec" if spec_made_it else None, code="ingest_refused") from None
            job = {"ingest": {"index": name, "index_path": str(path), "source": str(source),
                              "staging": str(staging_dir(checked.plan.read, path)), "spec": placed,
                              "replace": request.replace, "compact_after_shards": self.compact_after_shards,
                              "replace_files": list(files or []) if request.replace else []},
                   "documents": len(request.documents)}
            with self.service.spares.lend() as lent:
                task_id, why = self.service.store.create_ingest_task(
                    tenant, name, spec, job, STEPS, task_id=lent.task_id, limit=self.service.limits.max_tasks_per_key,
                    total=self.service.limits.max_tasks, seen=seen)
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
        made = self.service.store.index(name) if not (path / OWNER_FILE).exists() else None
        if made is not None and made["owner"] == tenant:  # a new index (or one made before owner files)
            write_owner(path, made)
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

    def delete_documents(self, name: str, ids: list[str], tenant: str) -> dict[str, Any]:
        """Tombstone every passage of ``ids``; which ids this request deleted (as the commit counts them: two requests
        at once each said they deleted the same id) and how many passages went."""
        path, row = self._owned(name, tenant)
        self._refuse_busy(name, row)
        with deleted_meanwhile(path, name):
            index = open_index(path)  # None: its first ingestion has not committed, so no documents (as GET says)
            present = live_doc_ids(index) if index is not None else set()
            asked = [i for i in dict.fromkeys(ids) if i in present]
            lost = index.delete_documents(asked) if asked else {}
        found = [i for i in dict.fromkeys(ids) if lost.get(i)]
        return {"index": name, "deleted": found, "missing": [i for i in dict.fromkeys(ids) if i not in found],
                "chunks": sum(lost.values())}

    def delete(self, name: str, tenant: str) -> dict[str, Any]:
        """Delete the index, its uploads and its record (moved aside first, so no search opens half of it)."""
        self._owned(name, tenant)
        return self.remove(name, tenant)

    def remove(self, name: str, owner: str) -> dict[str, Any]:
        """Forget ``owner``'s index ``name`` (a 409 while an ingestion runs), then remove its folder and uploads.

        The record goes and both folders are moved aside in one transaction of the task store, which an upload's
        queueing waits for: an upload queued after it makes the index anew, and nothing of this delete takes its
        file or its owner file (moved aside after the record went, they did: its task then failed)."""
        moved: list[Path] = []

        def move_aside() -> bool:
            moved.extend(doomed for folder in (self.folder / name, self.uploads / name)
                         if (doomed := move_folder_aside(folder)) is not None)
            return True

        why = self.service.store.forget_index(name, owner, before=move_aside, ingestions=True)
        if why != "ok":
            raise self._refusal(name, why)
        for doomed in moved:
            shutil.rmtree(doomed, ignore_errors=True)
        from operators.retrieve._index_retriever import forget_index

        forget_index(self.folder / name)  # this process's searches let go of it now, others at their next look
        return {"index": name, "deleted": True}

    # -- checks -------------------------------------------------------------------------------

    def _searchable(self) -> bool:
        """Whether a search may read the indices under the folder (inside the index roots), so the service adds any."""
        return adding_refused(self.folder, self.service.index_roots) is None

    def named(self, name: str) -> tuple[Path, dict[str, Any] | None]:
        """The folder of index ``name`` and its row (None: the service did not make it); a 422 for a bad name."""
        if not re.fullmatch(NAME_PATTERN, name):
            raise ApiError(422, f"index name '{one_line(name, 60)}' is not allowed: a letter or digit, then up to 63 "
                           "letters, digits, '_', '.' or '-'", param="name", code="invalid_index_name")
        return self.folder / name, self.service.store.index(name)

    def _writable(self, name: str, tenant: str) -> tuple[Path, dict[str, Any] | None]:
        """The folder of index ``name`` and its row (None: nobody has made it yet), if ``tenant`` may add to it."""
        path, row = self.named(name)
        if name in default_names(self.service.default_index):  # another index of its name
            raise ApiError(403, f"index '{name}' {DEFAULT_READ_ONLY}", param="name", code="index_read_only")
        if (why := adding_refused(self.folder, self.service.index_roots)) is not None:
            raise ApiError(403, why, param="name", code="indices_read_only")
        if row is None and path.exists():
            row = read_owner(path)
            if row is None:
                raise ApiError(403, f"index '{name}' {NOT_MADE_HERE}", param="name", code="index_read_only")
            if row["owner"] == tenant:  # the task store lost its row: its owner's change puts it back
                self.service.store.restore_index(row)
                row = self.service.store.index(name) or row
        if row is not None and row["owner"] != tenant:
            raise self._refusal(name, "owner")
        return path, row

    def _owned(self, name: str, tenant: str) -> tuple[Path, dict[str, Any]]:
        """The folder and row of an index ``tenant`` made here; 404 when there is none."""
        path, row = self._writable(name, tenant)
        if row is None:
            raise ApiError(404, f"no index named '{name}' made through this service", param="name",
                           code="index_not_found")
        return path, row

    def _spec(self, asked: str | None, row: dict[str, Any] | None) -> str:
        if row is not None:
            if asked is not None and asked != row["spec"]:
                raise ApiError(409, f"spec: this index was made with '{row['spec']}', not '{asked}'; leave spec out "
                               "to add documents to it", param="spec", code="spec_mismatch")
            return row["spec"]
        spec = asked or "ingest"
        if spec not in ingest_specs():
            raise ApiError(422, f"spec: '{spec}' is not a built-in ingest spec ({', '.join(ingest_specs())})",
                           param="spec", code="invalid_spec")
        return spec

    def _placed(self, spec: str, path: Path) -> str | dict[str, Any]:
        return placed_ingest_spec(spec, path, self.service.served, self.service.app_name)

    def _refusal(self, name: str, why: str) -> ApiError:
        return index_refusal(self.service.limits, name, why)

    def _refuse_busy(self, name: str, row: dict[str, Any] | None) -> None:
        """A 409 while an ingestion or a compaction of index ``name`` (its task store ``row``) runs: an upload's check
        would read its files half-written (a manifest being replaced), and could not be queued anyway."""
        running = row["ingest_task"] if row is not None else None
        task = self.service.store.task(running, None) if running else None
        if task is not None and task["status"] in UNFINISHED:
            raise self._refusal(name, f"busy:{running}")


def _ownership(row: dict[str, Any] | None, tenant: str) -> dict[str, Any]:
    owned = row is not None and row["owner"] == tenant
    return {"writable": owned, "spec": row["spec"] if row else None,
            "ingest_task": row["ingest_task"] if owned else None, "shared": row is None or bool(row["shared"])}
