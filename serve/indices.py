"""Indices made over HTTP: documents in (an ingestion task on Ray), documents and whole indices out.

A client sends documents as JSON (``POST /v1/indices/{name}/documents``). The replica checks
the body and the ingestion it asks for (ids given once and not already in the index, the
index's encoder on this machine), writes the documents to a JSONL file under
``$TESSERA_HOME/uploads/<name>/`` and queues an ingestion task (``serve.ingest_task``), which
the task API follows like any other. The index is ``$TESSERA_HOME/indices/<name>``, where a
search finds it by ``index: <name>``.

Who may change what:

* the key that made an index owns it, and only that key adds documents to it, deletes
  documents from it or deletes it; every key may search it, as any index under the index roots;
* an index the service did not make (the default index, one that ``tessera ingest`` built) is
  read-only here;
* one ingestion runs at a time per index (a second upload is a 409 naming the running task),
  and an upload is one shard, so its documents land together or not at all.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flows import store as flow_store
from serve.errors import ApiError
from serve.schemas import Text, check_texts
from serve.taskstore import UNFINISHED

#: Index names: one folder name, no path.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#: Doc-store columns that ingestion or search writes itself; metadata cannot take these names.
RESERVED = frozenset({"_id", "id", "docno", "doc_id", "text", "title", "vector", "qid", "query", "score", "rank"})
#: How many ids a 409 lists.
SHOWN_IDS = 10


class Document(BaseModel):
    """One document: its id, title and text, and metadata columns that filters can read."""

    model_config = ConfigDict(extra="forbid")

    id: Text = Field(min_length=1, max_length=200, description="The document's id, unique in the index; "
                     "its passages are `<id>#<n>`.")
    title: Text = Field("", max_length=1000, description="Title (embedded with the text, and matched by BM25).")
    text: Text = Field(min_length=1, description="The text; the index's ingest spec cuts it into passages.")
    metadata: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Extra doc-store columns (what metadata filters read), e.g. "
        "`{\"source\": \"handbook.pdf\", \"year\": 2024}`.")

    @field_validator("metadata")
    @classmethod
    def _columns(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        import re

        for key in metadata:
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,63}", key) or key in RESERVED:
                raise ValueError(f"metadata key '{key}' is not a column name this index can take (a letter, then "
                                 f"letters, digits or _; none of {', '.join(sorted(RESERVED))})")
        check_texts([v for v in metadata.values() if isinstance(v, str)], "metadata value")
        return metadata


class DocumentsRequest(BaseModel):
    """``POST /v1/indices/{name}/documents``."""

    model_config = ConfigDict(extra="forbid")

    documents: list[Document] = Field(min_length=1, description="The documents to add (at most "
                                      "max_documents_per_request).")
    spec: str | None = Field(None, description="For a new index: the built-in ingest spec that makes it "
                             "(`ingest`: passages of 256 tokens, MiniLM and BM25; `ingest_static`: the static "
                             "embedder). An existing index keeps its own; default `ingest`.")


class DeleteRequest(BaseModel):
    """``POST /v1/indices/{name}/delete``."""

    model_config = ConfigDict(extra="forbid")

    ids: list[Text] = Field(min_length=1, max_length=10_000, description="Ids of the documents to delete.")


def ingest_specs() -> list[str]:
    """The built-in ingest specs (an upload may name those whose models are here: ``Indices.specs``)."""
    return [name for name in flow_store.builtin_names() if name.startswith("ingest")]


class Indices:
    """The indices half of one replica's service: where they live, and what a key may do to them."""

    def __init__(self, service: Any):
        self.service = service
        self.folder = Path(service.home) / "indices"
        self.uploads = Path(service.home) / "uploads"

    # -- reading ------------------------------------------------------------------------------

    def listing(self, tenant: str) -> list[dict[str, Any]]:
        """The indices a search can name, each with its size and settings, and whether ``tenant`` may change it."""
        made = self.service.store.index_names()
        default = Path(self.service.default_index) if self.service.default_index else None
        paths = [default] if default else []
        if self._searchable():
            paths += [manifest.parent.resolve() for manifest in sorted(self.folder.glob("*/manifest.json"))]
        folder, entries = self.folder.resolve(), []
        for path in dict.fromkeys(paths):
            entry = _describe(path)
            if entry is None:
                continue
            name = path.name if path.parent == folder else None  # None: the default index, outside the folder
            entries.append({"name": name, "default": path == default, **entry,
                            **_ownership(made.get(name) if name else None, tenant)})
        listed = {e["name"] for e in entries}
        for name, row in made.items():  # the caller's new indices whose first ingestion has not committed yet
            if name not in listed and row["owner"] == tenant:
                entries.append({"name": name, "default": False, **EMPTY, **_ownership(row, tenant)})
        return entries

    def specs(self) -> list[dict[str, Any]]:
        """Each built-in ingest spec with its description, and why it cannot make an index here (its model is
        missing), else None."""
        from flows.ingestion.plan import build_plan, embed_params, index_settings, load_spec, require_models
        from operators.errors import TesseraError

        result = []
        for name in ingest_specs():
            plan = build_plan(name, None, None)
            try:
                require_models(embed_params(plan, index_settings(self.folder / ".none", None, plan.settings_base)),
                               None)
                missing = None
            except TesseraError as err:
                missing = str(err)
            result.append({"name": name, "description": " ".join(load_spec(name)[0].description.split()),
                           "missing": missing})
        return result

    # -- changing -------------------------------------------------------------------------------

    def add(self, name: str, request: DocumentsRequest, tenant: str) -> dict[str, Any]:
        """Check the documents and the ingestion, write them for the task, queue it; the task's id."""
        from flows.ingestion import check_ingest
        from operators.errors import TesseraError

        limit = self.service.limits.max_documents_per_request
        if len(request.documents) > limit:
            raise ApiError(422, f"{len(request.documents)} documents, over the limit max_documents_per_request="
                           f"{limit}; send them in several requests", param="documents",
                           code="max_documents_per_request")
        _given_once(request.documents)
        path = self._writable(name, tenant)
        row = self.service.store.index(name)
        spec = self._spec(request.spec, row)
        if (path / "manifest.json").exists():
            _not_in(path, [d.id for d in request.documents])
        source = self.uploads / name / f"{uuid.uuid4().hex}.jsonl"
        source.parent.mkdir(parents=True, exist_ok=True)
        _write_jsonl(source, request.documents)
        try:
            check_ingest(str(source), str(path), spec=spec, executor="local")
        except TesseraError as err:
            source.unlink(missing_ok=True)
            raise ApiError(422, f"this upload cannot be ingested: {err}", param="spec" if err.field else None,
                           code="ingest_refused") from None
        job = {"ingest": {"index": name, "index_path": str(path), "source": str(source), "spec": spec},
               "documents": len(request.documents)}
        from serve.ingest_task import STEPS

        task_id, why = self.service.store.create_ingest_task(tenant, name, spec, job, STEPS,
                                                              limit=self.service.limits.max_tasks_per_key)
        if task_id is None:
            source.unlink(missing_ok=True)
            raise self._refusal(name, why)
        return {"task_id": task_id, "index": name, "documents": len(request.documents), "spec": spec,
                "created": row is None}

    def add_files(self, name: str, files: list[tuple[str, bytes]], spec: str | None, tenant: str) -> dict[str, Any]:
        """``add`` for files: a PDF gives a document per page with text, a text or Markdown file one document."""
        from pydantic import ValidationError

        from serve.errors import validation_message

        if not files:
            raise ApiError(422, "files: send at least one file (multipart field `files`)", param="files")
        documents = [doc for filename, content in files for doc in file_documents(filename, content)]
        try:
            request = DocumentsRequest.model_validate({"documents": documents, "spec": spec})
        except ValidationError as err:
            message, param = validation_message(list(err.errors()))
            raise ApiError(422, message, param=param, code="invalid_value") from None
        return self.add(name, request, tenant)

    def delete_documents(self, name: str, ids: list[str], tenant: str) -> dict[str, Any]:
        """Tombstone every passage of ``ids``; which ids were found and how many passages went."""
        from operators.store import Index

        path = self._owned(name, tenant)
        running = self.service.store.index(name)["ingest_task"]
        task = self.service.store.task(running, None) if running else None
        if task is not None and task["status"] in UNFINISHED:
            raise self._refusal(name, f"busy:{running}")
        index = Index.open(path, verify=False)
        _, live = index.columns(["doc_id"])
        present = set(live.column("doc_id").cast("string").to_pylist())
        found = [i for i in dict.fromkeys(ids) if i in present]
        chunks = index.delete(doc_ids=found) if found else 0
        return {"index": name, "deleted": found, "missing": [i for i in dict.fromkeys(ids) if i not in present],
                "chunks": chunks}

    def delete(self, name: str, tenant: str) -> dict[str, Any]:
        """Delete the index, its uploads and its record (moved aside first, so no search opens half of it)."""
        self._owned(name, tenant)
        why = self.service.store.forget_index(name, tenant)
        if why != "ok":
            raise self._refusal(name, why)
        for folder in (self.folder / name, self.uploads / name):
            if folder.exists():
                doomed = folder.with_name(f".deleted-{name}-{uuid.uuid4().hex[:8]}")
                folder.rename(doomed)
                shutil.rmtree(doomed, ignore_errors=True)
        return {"index": name, "deleted": True}

    # -- checks -------------------------------------------------------------------------------

    def _searchable(self) -> bool:
        from serve.index_roots import under

        return under(self.folder.resolve(), self.service.index_roots)

    def _writable(self, name: str, tenant: str) -> Path:
        """The folder of index ``name``, if ``tenant`` may add to it (its owner, or nobody has made it yet)."""
        import re

        if not re.fullmatch(NAME_PATTERN, name):
            raise ApiError(422, f"index name '{name}' is not allowed: a letter or digit, then up to 63 letters, "
                           "digits, '_', '.' or '-'", param="name", code="invalid_index_name")
        if not self._searchable():
            raise ApiError(403, f"this service cannot add indices: {self.folder} is outside its index roots "
                           "(args.service.index_roots), so no search could read them", param="name",
                           code="indices_read_only")
        path = self.folder / name
        row = self.service.store.index(name)
        if row is None and path.exists():
            raise ApiError(403, f"index '{name}' was not made through this service; it is read-only here "
                           "(change it with `tessera index` or `tessera ingest`)", param="name",
                           code="index_read_only")
        if row is not None and row["owner"] != tenant:
            raise ApiError(403, f"index '{name}' belongs to another key; only its owner can change it",
                           param="name", code="index_not_owned")
        return path

    def _owned(self, name: str, tenant: str) -> Path:
        """The folder of an index ``tenant`` made here; 404 when there is none."""
        path = self._writable(name, tenant)
        if self.service.store.index(name) is None:
            raise ApiError(404, f"no index named '{name}' made through this service", param="name",
                           code="index_not_found")
        return path

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

    def _refusal(self, name: str, why: str) -> ApiError:
        if why.startswith("busy:"):
            return ApiError(409, f"index '{name}' has an ingestion running (task {why[5:]}); wait for it to finish "
                            "(GET /task/progress/{id}) and send these documents again", param="name",
                            code="index_busy")
        if why == "owner":
            return ApiError(403, f"index '{name}' belongs to another key; only its owner can change it",
                            param="name", code="index_not_owned")
        limit = self.service.limits.max_tasks_per_key
        return ApiError(429, f"this key has {limit} tasks queued or running, the limit max_tasks_per_key={limit}; "
                        "wait for one to finish or cancel one", code="max_tasks_per_key")


#: What ``listing`` says of an index that has no documents yet.
EMPTY = {"chunks": 0, "shards": 0, "bm25": None, "dense": None, "encoder": None}


def _ownership(row: dict[str, Any] | None, tenant: str) -> dict[str, Any]:
    owned = row is not None and row["owner"] == tenant
    return {"writable": owned, "spec": row["spec"] if row else None,
            "ingest_task": row["ingest_task"] if owned else None}


def _describe(path: Path) -> dict[str, Any] | None:
    """Size and settings of the index at ``path``; None when there is none (or it cannot be read)."""
    from operators.store import Index
    from operators.store.errors import IndexStoreError

    try:
        index = Index.open(path, verify=False)
    except (IndexStoreError, OSError):
        return None
    settings = index.settings
    return {"chunks": index.counts()["live_chunks"], "shards": index.counts()["shards"], "bm25": settings.bm25,
            "dense": settings.dense, "encoder": settings.encoder if settings.dense else None}


def _given_once(documents: list[Document]) -> None:
    seen: dict[str, int] = {}
    for i, doc in enumerate(documents):
        if doc.id in seen:
            raise ApiError(422, f"documents.{i}.id: '{doc.id}' is given twice (also documents.{seen[doc.id]})",
                           param="documents", code="duplicate_id")
        seen[doc.id] = i


def _not_in(path: Path, ids: list[str]) -> None:
    """409 when any of ``ids`` is a document of the index already (replacing is a delete, then an add)."""
    from operators.store import Index

    _, live = Index.open(path, verify=False).columns(["doc_id"])
    present = set(live.column("doc_id").cast("string").to_pylist())
    taken = [i for i in ids if i in present]
    if taken:
        shown = ", ".join(f"'{i}'" for i in taken[:SHOWN_IDS]) + (" ..." if len(taken) > SHOWN_IDS else "")
        raise ApiError(409, f"{len(taken)} document id(s) are in the index already: {shown}; delete them first "
                       "(POST /v1/indices/{name}/delete) to replace them", param="documents",
                       code="documents_exist")


#: What ``POST /v1/indices/{name}/files`` takes (JSON and JSONL documents go to ``.../documents``).
TEXT_SUFFIXES = (".txt", ".md", ".markdown")


def file_documents(filename: str, content: bytes) -> list[dict[str, Any]]:
    """The documents of one uploaded file, with its name (and page) as metadata, as ``sources.pdf`` reads a PDF;
    a 422 naming the file when it gives none."""
    import io

    from operators.errors import SourceError
    from operators.sources.pdf import read_pdf

    path = Path(filename or "")
    if path.name != filename or not filename:
        raise ApiError(422, f"files: '{filename}' is not a file name", param="files", code="invalid_file")
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        try:
            title, pages = read_pdf(io.BytesIO(content), name=filename)
        except SourceError as err:
            raise ApiError(422, f"files: {err.message}", param="files", code="invalid_file") from None
        documents = [{"id": f"{path.stem}-p{n}", "title": title or path.stem, "text": text,
                      "metadata": {"path": filename, "page": n}} for n, text in enumerate(pages, start=1) if text]
        if not documents:
            raise ApiError(422, f"files: no page of '{filename}' has a text layer (a scan?); nothing to index "
                           "(no OCR is done)", param="files", code="invalid_file")
        return documents
    if suffix in TEXT_SUFFIXES:
        try:
            text = content.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise ApiError(422, f"files: '{filename}' is not UTF-8 text ({err.reason} at byte {err.start})",
                           param="files", code="invalid_file") from None
        return [{"id": filename, "title": path.stem, "text": text, "metadata": {"path": filename}}]
    kinds = ", ".join((".pdf", *TEXT_SUFFIXES))
    raise ApiError(422, f"files: '{filename}' is not a PDF, text or Markdown file ({kinds}); send JSON or JSONL "
                   "documents to /v1/indices/{name}/documents", param="files", code="invalid_file")


def _write_jsonl(path: Path, documents: list[Document]) -> None:
    """The documents as BEIR JSONL (``_id``, ``title``, ``text``, metadata as more fields), for ``sources.jsonl``.

    Every record has every metadata key of the upload (null where a document has none): ``sources.jsonl`` keeps
    the fields of a file's first record, and a page number must not be lost because a text file came first."""
    keys = list(dict.fromkeys(key for doc in documents for key in doc.metadata))
    with open(path, "w", encoding="utf-8") as out:
        for doc in documents:
            metadata = {key: doc.metadata.get(key) for key in keys}
            out.write(json.dumps({**metadata, "_id": doc.id, "title": doc.title, "text": doc.text},
                                 ensure_ascii=False) + "\n")
