"""Indices made over HTTP: documents in (an ingestion task on Ray), documents and whole indices out.

A client sends documents as JSON (``POST /v1/indices/{name}/documents``). The replica checks
the body and the ingestion it asks for (ids given once and not already in the index, the
index's encoder on this machine), writes the documents to a JSONL file under
``$TESSERA_HOME/uploads/<name>/`` and queues an ingestion task (``serve.tasks.ingest_task``), which
the task API follows like any other. The index is ``$TESSERA_HOME/indices/<name>``, where a
search finds it by ``index: <name>``.

Who may change what:

* the key that made an index owns it, and only that key adds documents to it, deletes
  documents from it or deletes it;
* only its owner searches it, lists it and reads its documents until the owner shares it with
  every key (``PATCH /v1/indices/{name}``, ``refuse_unshared``);
* an index the service did not make (the default index, one that ``tessera ingest`` built) is
  searchable by every key and read-only here; the service knows the indices it made by their row
  in the task store and by the owner file in their folder (``serve.indices.index_owner``), so a store
  that lost its rows does not make them everyone's;
* one ingestion runs at a time per index (a second upload is a 409 naming the running task),
  and an upload is one shard, so its documents land together or not at all.

An upload's checks and queueing (``Indices.add``, ``add_files``) are ``serve.indices.index_uploads``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from flows import store as flow_store
from operators.errors import one_line
from serve.http.errors import ApiError, index_refusal
from serve.indices.index_owner import (DEFAULT_READ_ONLY, NOT_MADE_HERE, adding_refused, check_named, default_names,
                               index_holding, read_owner, readable, unshared, write_owner)
from serve.indices.index_reading import EMPTY, deleted_meanwhile, describe, live_doc_ids, open_index, stored_forms
from serve.indices.index_uploads import CHANGED_TRIES, Uploads  # noqa: F401 (re-exported)
from serve.tasks.ingest_task import move_folder_aside
from serve.runs.served_models import placed_ingest_spec
from serve.tasks.taskstore import UNFINISHED

#: Index names: one folder name, no path.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def ingest_specs() -> list[str]:
    """The built-in ingest specs (an upload may name those whose models are here: ``Indices.specs``)."""
    return [name for name in flow_store.builtin_names() if name.startswith("ingest")]


class Indices(Uploads):
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
                from serve.runs.flow_request import public_text

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
        """One document of index ``name`` with its passages (``serve.indices.index_documents``)."""
        from serve.indices.index_documents import document

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
        from serve.indices.index_roots import confine, index_params

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

    def delete_documents(self, name: str, ids: list[str], tenant: str) -> dict[str, Any]:
        """Tombstone every passage of ``ids``; which ids this request deleted (as the commit counts them: two requests
        at once each said they deleted the same id) and how many passages went."""
        path, row = self._owned(name, tenant)
        self._refuse_busy(name, row)
        with deleted_meanwhile(path, name):
            index = open_index(path)  # None: its first ingestion has not committed, so no documents (as GET says)
            present = live_doc_ids(index) if index is not None else set()
            stored = stored_forms(ids, present)  # an NFC id finds the NFD one a macOS file name gave
            asked = list(dict.fromkeys(s for s in stored.values() if s in present))
            lost = index.delete_documents(asked) if asked else {}
        found = [i for i in stored if lost.get(stored[i])]
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
        moved: dict[Path, Path] = {}  # aside -> where it was

        def move_aside() -> bool:
            moved.update((doomed, folder) for folder in (self.folder / name, self.uploads / name)
                         if (doomed := move_folder_aside(folder)) is not None)
            return True

        try:
            why = self.service.store.forget_index(name, owner, before=move_aside, ingestions=True)
        except BaseException:  # the record stays (a full disk would not take its delete): so do the folders, put back
            for doomed, folder in moved.items():  # (they were left aside: the index empty, its space never freed)
                os.rename(doomed, folder)
            raise
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
