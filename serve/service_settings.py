"""The service's arguments (``args.service`` in serve/config.yaml): default index, task store, API keys, limits.

Everything here is resolved in the process that builds the app (``serve run``'s driver,
where relative paths, ``$TESSERA_HOME`` and the environment are the user's), and the
ingress receives the result: absolute paths, a full SQLAlchemy URL, and key *hashes*
only, so no raw key travels to a replica or reaches a log. ``$TESSERA_HOME`` travels too:
the ingress and the task actors use the builder's (saved flows, named indices), not
whatever their Ray worker inherited.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from operators.api_keys import (KEY_ID_PATTERN, KEYS_ENV, env_key_id, env_keys, key_hash,  # noqa: F401 (KEYS_ENV,
                                reserved_id_problem)  # key_hash: here too)
from operators.redact import remember_secret
from serve.indices.index_roots import default_data_roots, default_roots

#: Every model of the app's settings: no unknown field, and strict types. Pydantic's lax mode reads the text "yes",
#: "off" or "1" (a quoted YAML value) and the number 1 as a boolean, and ``true`` or "8" as a number: ``admin: "yes"``
#: made an admin key. A setting takes YAML's own ``true``/``false`` and numbers only; anything else stops the start,
#: naming the field (``serve.settings.parse_args``).
SETTINGS = ConfigDict(extra="forbid", strict=True)
#: ``ServiceArgs.compact_after_shards``'s default.
COMPACT_AFTER_SHARDS = 32
#: ``ServiceArgs.max_idle_task_workers``'s default. An idle worker costs memory (about 250 MB), not CPU, and tasks
#: mostly wait on Serve deployments and the store, so a cap by cores would retire workers that a steady load reuses;
#: 16 bounds what a burst leaves behind to about 4 GB for ``IDLE_TASK_WORKER_RETIRE_S``.
MAX_IDLE_TASK_WORKERS = 16
#: ``ServiceArgs.idle_task_worker_retire_s``'s default: the recent peak of concurrent tasks is kept this long
#: (longer than the gaps of a steady load, short enough to give back a burst's memory within a minute or two).
IDLE_TASK_WORKER_RETIRE_S = 60.0
#: ``ServiceArgs.answer_threads``'s default: the most threads the event loop's default pool ever had (min(32, CPUs +
#: 4)), which the answers shared with every other request's work before they had threads of their own.
ANSWER_THREADS = 32


class ApiKey(BaseModel):
    """One client: an id (what owns its tasks, chats and flows) and the SHA-256 of its bearer key."""

    model_config = SETTINGS

    id: str = Field(pattern=KEY_ID_PATTERN, description="Key id: owns the key's tasks, chats "
                    "and saved flows; shown in logs instead of the key.")
    sha256: str = Field(description="SHA-256 of the key, hex (`tessera keys new` makes a "
                        "key and prints it; `tessera keys id KEY` gives an existing key's).")
    admin: bool = Field(False, description="An admin key also lists every index the service made, whoever owns it, "
                        "and deletes any of them (GET and DELETE /v1/admin/indices): the way to reclaim the indices "
                        "of a key that was removed.")

    @field_validator("sha256")
    @classmethod
    def _a_hash(cls, digest: str) -> str:
        """Said as what to write: pydantic's "String should match pattern '^[0-9a-f]{64}$'" did not say that a raw key
        pasted here (or a hash in capitals, cut short) is not the key's SHA-256."""
        if re.fullmatch(r"[0-9a-f]{64}", digest):
            return digest
        what = ("a raw key, not its hash" if digest.startswith("tessera_") else "in capitals" if
                re.fullmatch(r"[0-9a-fA-F]{64}", digest) else f"{len(digest)} characters")
        raise ValueError(f"must be the key's SHA-256, 64 lowercase hex digits (this is {what}): `tessera keys id "
                         "KEY` prints the entry for a key, `tessera keys new --id ID` makes a key and its entry")

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, key_id: str) -> str:
        if problem := reserved_id_problem(key_id):  # 'local': the keyless caller, its tasks, indices and flows
            raise ValueError(problem)
        return key_id


class Limits(BaseModel):
    """What one request or one key may ask for; each one exceeded is a 4xx that names it."""

    model_config = SETTINGS

    max_tasks_per_key: int = Field(4, gt=0, description="Tasks a key may have queued or running at once (429).")
    max_tasks: int = Field(8, gt=0, description="Tasks the service may have queued or running at once, every key's "
                           "together (429 with Retry-After): each runs in a Ray worker of its own, and 16 at once on "
                           "a 24 GB machine met Ray's memory monitor, which killed Serve's controller.")
    max_body_bytes: int = Field(1_000_000, gt=0, description="Largest request body, in bytes (413).")
    max_queries_per_request: int = Field(100, gt=0, description="Most queries one request may send (422).")
    max_query_chars: int = Field(10_000, gt=0, description="Longest query, in characters (422): a search's, a task's, "
                                 "the question a flow answers in a chat. A query is searched for, not read: BM25 "
                                 "and the encoders spend time on every word of it.")
    max_chat_chars: int = Field(100_000, gt=0, description="Most characters the messages of a chat with a served "
                                "language model may hold in all (400 naming `messages`), checked before the model "
                                "tokenises them: llama.cpp read a 600 KB message before saying it did not fit.")
    max_upload_bytes: int = Field(20_000_000, gt=0, description="Largest file upload (POST /v1/indices/{name}/"
                                  "files), in bytes (413).")
    max_metadata_keys: int = Field(200, gt=0, description="Most metadata keys an index's documents may hold together, "
                                   "each a column of its doc store (422 for an upload that would pass it).")
    max_documents_per_request: int = Field(1000, gt=0, le=5000, description="Most documents one upload may add "
                                           "to an index (422); each upload is one shard of at most 5,000.")
    max_result_rows: int = Field(10_000, gt=0, description="Most rows a result may hold (413 for a search or a "
                                 "run; an enqueued task over it fails naming the limit).")
    max_pdf_seconds: float = Field(60.0, gt=0, description="Longest an uploaded PDF's text may take to read, in "
                                   "seconds, in a child process of at most 2 GiB (422 naming the file).")
    # a request's flow, its step options and call params (serve/runs/step_bounds.py): a 422 naming the field for more
    max_steps: int = Field(50, gt=0, description="Most steps a request's flow (its own, a saved one, a mosaicRAG "
                           "request) may have; the largest built-in flow has 11.")
    max_step_batch_size: int = Field(10_000, gt=0, description="Most rows a step's batch_size, and a param ending "
                                     "in batch_size or batch_rows, may ask for.")
    max_step_concurrency: int = Field(16, gt=0, description="Most a step's concurrency, and a param named "
                                      "concurrency or concurrent_requests (calls in flight), may ask for.")
    max_step_num_cpus: float = Field(16, gt=0, description="Most CPUs a step's num_cpus may ask for.")
    max_step_num_gpus: float = Field(1, ge=0, description="Most GPUs a step's num_gpus may ask for.")
    max_call_timeout_s: float = Field(600, gt=0, description="Most seconds a param ending in timeout (one call "
                                      "to a model or a server) may ask for.")
    max_call_retries: int = Field(5, ge=0, description="Most retries a param ending in retries may ask for.")


class ServiceArgs(BaseModel):
    """The flow half of the app: where tasks live, which index flows search by default, who may call."""

    model_config = SETTINGS

    default_index: str | None = Field(".tessera/indices/sample", description="Index for flows whose retrieval "
                                      "steps name none (a path, relative to where the app is started, or a name "
                                      "under $TESSERA_HOME/indices); tessera ingest --index PATH builds it (in a "
                                      "clone, `make demo` builds the sample index).")
    index_roots: list[str] | None = Field(None, description="Folders whose indices requests may name (a body's "
                                          "`index`, a step's `params.index`); anything outside is a 422 naming "
                                          "the field. Default: the default index's parent and "
                                          "$TESSERA_HOME/indices. The default index is always allowed.")
    data_roots: list[str] | None = Field(None, description="Folders whose files a request's steps may read (a "
                                         "source's `path`, `retrieve.corpus_bm25`'s `corpus`, a vector store "
                                         "folder); anything else is a 422 naming the field. Default: the "
                                         "repository's data/ (the bundled sample); [] allows no files.")
    task_store: str | None = Field(None, description="SQLAlchemy URL of the task store; default: SQLite (WAL) "
                                   "at $TESSERA_HOME/tasks.db.")
    task_retention_days: float | None = Field(30, ge=0, description="Days an ended task (finished, failed, "
                                              "cancelled) and its chats are kept after it ended; older ones are "
                                              "deleted when the app starts and then hourly. 0 or null: keep every "
                                              "task. An index's latest ingestion task is kept while the index is.")
    api_keys: list[ApiKey] = Field(default_factory=list, description="Allowed keys, hashed; TESSERA_API_KEYS adds "
                                   "raw keys from the environment. With any key, every route but /healthz needs "
                                   "one.")
    task_num_cpus: float = Field(0, ge=0, description="CPUs each task's Ray actor reserves (0: tasks share the "
                                 "CPUs with the replicas; on a cluster, 1 keeps tasks off busy nodes).")
    spare_task_workers: int = Field(1, ge=0, le=8, description="Task actors each ingress replica keeps started "
                                    "at least, their imports done, for its next tasks: a task then waits for no "
                                    "new process (about 2 s). Workers back from their tasks wait too, up to the "
                                    "recent peak of concurrent tasks (max_idle_task_workers at most), and those "
                                    "beyond this number exit after idle_task_worker_retire_s without a task; 0: "
                                    "every task starts its own worker, which exits after it.")
    max_idle_task_workers: int = Field(MAX_IDLE_TASK_WORKERS, ge=1, le=256, description="Most task actors each "
                                       "ingress replica keeps waiting (its spares and the workers back from their "
                                       "tasks); at least spare_task_workers. An idle worker holds about 250 MB and "
                                       "no CPU.")
    idle_task_worker_retire_s: float = Field(IDLE_TASK_WORKER_RETIRE_S, gt=0, le=86_400, description="Seconds a "
                                             "waiting task actor beyond spare_task_workers stays without a task "
                                             "before it exits: the recent peak of concurrent tasks is kept this "
                                             "long.")
    answer_threads: int = Field(ANSWER_THREADS, ge=1, le=1024, description="Flows that answer (chats, streamed or "
                                "not, and searches whose flow calls a language model) each ingress replica runs at "
                                "once, each on a thread of its own until its answer is written: apart from the "
                                "threads of other searches and requests, which never wait behind them "
                                "(serve/http/threads.py).")
    answer_queue: int = Field(ANSWER_THREADS, ge=0, le=4096, description="Answers that wait for an answer thread when "
                              "all answer_threads are taken; one more is refused with a 503 too_many_answers and "
                              "Retry-After.")
    limits: Limits = Field(default_factory=Limits, description="Request and per-key limits.")
    compact_after_shards: int = Field(COMPACT_AFTER_SHARDS, ge=0, description="An upload (each one adds a shard) "
                                      "that leaves its index with more shards than this compacts the index at its "
                                      "end, in the upload's task: searches load and merge fewer shards, and each "
                                      "commit rewrites a smaller manifest. 0: never (an admin key compacts with "
                                      "POST /v1/admin/indices/{name}/compact).")
    allow_public_without_keys: bool = Field(False, description="Start on a non-loopback host without API keys "
                                            "(refused by default: anyone who reaches the port could run flows).")

    @field_validator("max_idle_task_workers")
    @classmethod
    def _room_for_the_spares(cls, cap: int, info: ValidationInfo) -> int:
        spares = info.data.get("spare_task_workers")
        if spares is not None and cap < spares:
            raise ValueError(f"{cap} is below spare_task_workers ({spares}), the workers a replica keeps waiting "
                             "at least")
        return cap

    @field_validator("task_store")
    @classmethod
    def _usable_url(cls, url: str | None) -> str | None:
        """A URL that names no usable store (``sqlite://tasks.db``: in memory; ``postgress://``), refused where the
        config is read, ``serve run``'s build included, not only by ``tessera serve``'s start check."""
        from flows.task_store_check import url_problem

        if url is not None and (problem := url_problem(url)):
            raise ValueError(problem)
        return url

    @field_validator("api_keys")
    @classmethod
    def _unique_ids(cls, keys: list[ApiKey]) -> list[ApiKey]:
        ids = [k.id for k in keys]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"key id(s) {dup} used twice")
        by_hash: dict[str, list[str]] = {}
        for key in keys:
            by_hash.setdefault(key.sha256, []).append(key.id)
        shared = [ids for ids in by_hash.values() if len(ids) > 1]
        if shared:  # one key would be the last entry's id: another key's tasks, indices, maybe its admin rights
            raise ValueError(f"key ids {shared[0]} have the same sha256: one key would act as the last of them; "
                             "give each id its own key")
        return keys


def setting(config: dict[str, Any], name: str) -> Any:
    """``config[name]``, else ``ServiceArgs``'s default for it: what ``Service`` reads of a config that ``resolve`` did
    not make (a test's, a benchmark's), so the defaults are declared once, on the model."""
    return config[name] if name in config else ServiceArgs.model_fields[name].get_default(call_default_factory=True)


def resolve(service: ServiceArgs, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """What the ingress gets: absolute index path, full store URL, key hashes (from config and environment)."""
    from flows.task_store_url import absolute_task_store_url, default_task_store_url
    from operators.home import tessera_home
    from operators.store import resolve_index

    environ = os.environ if environ is None else environ
    index = None
    if service.default_index:
        index = str(Path(resolve_index(service.default_index)).resolve())
    if service.index_roots is None:
        roots = default_roots(index, tessera_home())
    else:
        roots = [str(Path(root).expanduser().resolve()) for root in [*service.index_roots, *filter(None, [index])]]
    store = absolute_task_store_url(service.task_store) if service.task_store else default_task_store_url()
    keys = {k.sha256: k.id for k in service.api_keys}
    for raw in env_keys(environ):
        remember_secret(raw)  # masked in this process's logs from now on
        digest = key_hash(raw)
        if digest not in keys:
            keys[digest] = env_key_id(digest, set(keys.values()))
    data_roots = default_data_roots() if service.data_roots is None else [
        str(Path(root).expanduser().resolve()) for root in service.data_roots]
    return {"home": str(tessera_home().resolve()), "default_index": index, "index_roots": roots,
            "data_roots": data_roots, "task_store": store, "task_retention_days": service.task_retention_days,
            "keys": keys, "admins": sorted(k.id for k in service.api_keys if k.admin),
            "task_num_cpus": service.task_num_cpus,
            "spare_task_workers": service.spare_task_workers, "max_idle_task_workers": service.max_idle_task_workers,
            "idle_task_worker_retire_s": service.idle_task_worker_retire_s,
            "compact_after_shards": service.compact_after_shards,
            "answer_threads": service.answer_threads, "answer_queue": service.answer_queue,
            "limits": service.limits.model_dump(), "allow_public_without_keys": service.allow_public_without_keys}
