"""A real Ray Serve app on localhost for the serve tests: MiniLM, an untrained-head cross-encoder, ColBERT,
the embedded language model (llama.cpp), a configured model whose weights are absent, and the flow routes over
the sample index with a task store in a temporary $TESSERA_HOME. One app serves every module of this package
(starting it takes half a minute); a test that deploys an app of its own gives it its own name and route prefix."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from operators.testing import JsonHandler
from serve.chat import chat, chat_flows, cohere_chat
from serve.tasks.results import progress_body
from serve.tasks.taskstore import TaskStore


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def free_port_number() -> int:
    return free_port()


class _Uvicorn:
    """uvicorn serving ``app`` on a free port of 127.0.0.1 on a thread of this process, without Ray."""

    def __init__(self, app: Any, root_path: str = "") -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                                    root_path=root_path))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            assert self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.server.config.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


#: The service app's server, started by the first test that asks and kept for the next (the app serves the last
#: ``Service`` made, so one server does for every test): a server's start and stop cost about 0.2 s, mostly
#: uvicorn's 0.1 s ticks, which over a hundred tests was a tenth of ``make test-fast``'s time. ``shared_api`` stops it.
_SERVICE_API: list[_Uvicorn] = []


@pytest.fixture(scope="session", autouse=True)
def shared_api():
    """Stops the service app's server at the end of the session, where a test started it."""
    yield
    while _SERVICE_API:
        _SERVICE_API.pop().stop()


@contextlib.contextmanager
def api_on_localhost(keys: dict | None = None, app: Any = None, root_path: str = ""):
    """The service's FastAPI app (``serve.api.app``, serving the last ``Service`` made), or ``app``, under uvicorn on a
    free port of 127.0.0.1, without Ray: yields its base URL. ``app``'s server stops after; the service app's is
    shared by the tests (``_SERVICE_API``). ``keys`` (a resolved config's ``keys``): the API keys it checks
    meanwhile, none again after. ``root_path``: the prefix a proxy in front serves it under (uvicorn's
    ``--root-path``, Serve's ``http_options.root_path``), on a server of its own."""
    from serve.security import auth
    from serve.api import app as service_app

    if keys is not None:
        auth.configure(keys, None, None)
    own = None
    try:
        if root_path:
            own = _Uvicorn(app or service_app, root_path)
            yield own.url
        elif app is None or app is service_app:
            if not _SERVICE_API:
                _SERVICE_API.append(_Uvicorn(service_app))
            yield _SERVICE_API[0].url
        else:
            own = _Uvicorn(app)
            yield own.url
    finally:
        if own is not None:
            own.stop()
        if keys is not None:
            auth.configure({}, None, None)


@pytest.fixture(scope="session")
def ce_path(untrained_ce) -> str:
    """A real CrossEncoder checkpoint on disk (the packaged MiniLM with a seeded, untrained head; the session's)."""
    return str(untrained_ce)


@pytest.fixture(scope="session")
def colbert_path(tmp_path_factory) -> str:
    """A ColBERT checkpoint (the packaged MiniLM with a seeded, untrained projection)."""
    from operators.models.colbert import new_colbert

    return str(new_colbert("minilm").save(tmp_path_factory.mktemp("serve-models") / "colbert"))


def app_args(ce: str, colbert: str) -> dict:
    fast = {"max_batch_size": 8, "batch_wait_timeout_s": 0.05}
    models = [
        {"name": "all-MiniLM-L6-v2", "aliases": ["minilm", "sentence-transformers/all-MiniLM-L6-v2"],
         "op": "embed.sentence_transformer",
         "params": {"model": "all-MiniLM-L6-v2"}, "num_cpus": 0.5, "num_gpus": 0, "batching": fast},
        {"name": "tessera-cross-encoder", "op": "rerank.cross_encoder", "params": {"model": ce}, "num_cpus": 0.5,
         "num_gpus": 0, "batching": fast},
        {"name": "absent-ce", "op": "rerank.cross_encoder", "params": {"model": "no-such-model-anywhere"}},
        {"name": "tessera-colbert", "op": "rerank.colbert", "params": {"model": colbert}, "num_cpus": 0.5,
         "num_gpus": 0, "batching": fast},
    ]
    # The embedded SmolLM2 on llama.cpp behind /v1/chat/completions: one replica, one thread.
    llms = [{"name": "smollm2", "aliases": ["local"], "threads": 1, "num_cpus": 0.25,
             "autoscaling": {"min_replicas": 1, "max_replicas": 1}}]
    return {"models": models, "llms": llms}


#: The shared app's limits: low enough that a test reaches each one with a small request.
LIMITS = {"max_tasks_per_key": 3, "max_body_bytes": 100_000, "max_queries_per_request": 5, "max_result_rows": 400,
          "max_chat_chars": 30_000}


@pytest.fixture(scope="session")
def limits() -> dict:
    return dict(LIMITS)


@pytest.fixture(scope="package", autouse=True)
def tessera_home(tmp_path_factory):
    """A fresh $TESSERA_HOME for the package (saved flows, the task store of apps that name none)."""
    home = tmp_path_factory.mktemp("tessera-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TESSERA_HOME", str(home))
        yield home


@pytest.fixture(scope="package")
def task_store_url(tessera_home, request) -> str:
    """The Serve app's task store: SQLite in the package's home; a database on the session's PostgreSQL server when
    ``TESSERA_TEST_TASK_STORE=postgresql`` (the cluster configs' store, for a run of the service tests on it)."""
    import os

    if os.environ.get("TESSERA_TEST_TASK_STORE") == "postgresql":
        server = request.getfixturevalue("postgres_server")
        server.psql("CREATE DATABASE tessera_serve_tests;")
        return server.get_uri("tessera_serve_tests").replace("postgresql://", "postgresql+psycopg://", 1)
    return f"sqlite:///{tessera_home / 'tasks.db'}"


@pytest.fixture(scope="package")
def serve_app(ray_session, ce_path, colbert_path, sample_index, task_store_url):
    """Serve on 127.0.0.1:<free port> with the app ``tessera``; yields its base URL; shut down after the package
    (tests/serve has an ``__init__.py`` for that: without one, pytest keeps a package fixture to the session)."""
    from ray import serve

    from serve.app import build_app

    port = free_port()
    quiet = {"log_level": "WARNING"}
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config=quiet)
    try:
        args = app_args(ce_path, colbert_path)
        args["service"] = {"default_index": str(sample_index), "task_store": task_store_url, "limits": LIMITS}
        serve.run(build_app(args), name="tessera", route_prefix="/", logging_config=quiet)
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory):
    """A real PostgreSQL server for the session (pgserver's packaged binaries, on a Unix socket only, stopped at the
    end), as the cluster configs' task store; skipped with the reason where it cannot run."""
    try:
        import pgserver
        import psycopg  # noqa: F401  (the driver the cluster configs name: postgresql+psycopg://)
    except ImportError as err:
        pytest.skip(f"no PostgreSQL for the task store tests ({err}): pip install -e '.[test]'")
    try:
        server = pgserver.get_server(tmp_path_factory.mktemp("postgres"), cleanup_mode="stop")
    except Exception as err:  # noqa: BLE001  (initdb or pg_ctl failing on this machine)
        pytest.skip(f"PostgreSQL does not start here: {err}")
    yield server
    server.cleanup()


@pytest.fixture
def postgres_database(postgres_server) -> str:
    """A SQLAlchemy URL of a new, empty database on the session's PostgreSQL server."""
    import uuid

    name = f"tessera_{uuid.uuid4().hex[:12]}"
    postgres_server.psql(f"CREATE DATABASE {name};")
    return postgres_server.get_uri(name).replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])  # psql: a process a database
def store_url(request, tmp_path) -> str:
    """A new, empty task store: a SQLite file, or a database of its own on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.db'}"
    return request.getfixturevalue("postgres_database")


@pytest.fixture(autouse=True)
def usual_umask():
    """A ``Service`` built in the test process sets its umask to 077 (``serve.security.private_files``); each test
    starts and ends with the usual 022, so a later test's files do not get their modes from an earlier test's
    service."""
    before = os.umask(0o022)
    yield
    os.umask(before)


@pytest.fixture(autouse=True)
def services_closed(monkeypatch):
    """Each ``Service`` a test made in this process is closed after it (``Service.close``): each held a pool of
    task store connections, and a worker of ``make test`` reached descriptors over 1024, which ``select`` refuses
    (CI: "filedescriptor out of range in select()" in a later test). Torn down after ``no_warm_up_left``."""
    from serve.service import Service

    made: list[Service] = []
    init = Service.__init__

    def recorded(self, *args, **kwargs):
        made.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(Service, "__init__", recorded)
    yield
    for service in made:
        if hasattr(service, "pruner"):  # its __init__ got that far (a config error stops it before)
            service.close()


@pytest.fixture(autouse=True)
def no_warm_up_left():
    """A ``Service`` warms up on a daemon thread (``serve.runs.warm``) that imports torch and builds flows: one a test
    left running imported modules while the next test's setup iterated them (CI: "dictionary changed size during
    iteration" in a fixture's setup). Each test ends with its services' warm-ups done."""
    yield
    for thread in threading.enumerate():
        if thread.name == "tessera-warm-up":
            thread.join(timeout=120)


@pytest.fixture
def make_service(tmp_path, monkeypatch):
    """A ``Service`` without Ray or HTTP, for what ``prepare`` and the stores decide: ``$TESSERA_HOME`` under
    ``tmp_path`` with an index-shaped folder (a manifest) per name of ``indices``, the first the default index, and a
    task store of its own."""
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    def make(indices=("news",), models=(), **args):
        home = tmp_path / "home"
        for name in indices:
            (home / "indices" / name).mkdir(parents=True, exist_ok=True)
            (home / "indices" / name / "manifest.json").write_text("{}")
        monkeypatch.setenv("TESSERA_HOME", str(home))
        args = ServiceArgs(default_index=str(home / "indices" / indices[0]),
                           task_store=f"sqlite:///{tmp_path / 'tasks.db'}", **args)
        service = Service(resolve(args, environ={}), list(models), "tessera")
        service.warming.join(timeout=120)  # its warm-up builds flows too: done before a test counts or patches them
        return service

    return make


@pytest.fixture
def base(make_service):
    """The HTTP API of a ``make_service()`` service on localhost: its base URL."""
    make_service()
    with api_on_localhost() as url:
        yield url


#: The result of a finished search that the task chat tests ground their answers on (``finished_search``).
SEARCH_ROWS = [{"qid": "1", "docno": "bees#0", "title": "Bees", "text": "Honey bees make honey from nectar.",
                "score": 1.0, "rank": 1}]


@contextlib.contextmanager
def paced_model(tmp_path: Path, monkeypatch, words: int):
    """The local fault server as the service's models (``fault-paced``: a word every 50 ms), its reply ``words``
    words and a citation; the server, which counts the streams whose reader went away."""
    from operators.llm.testing import KEY_ENV, FaultServer

    reply = " ".join(f"bees{i}" for i in range(words)) + " [1]."
    with FaultServer(reply=reply) as server:
        monkeypatch.setenv("TESSERA_MODELS", str(server.models_file(tmp_path / "models.yaml")))
        monkeypatch.setenv(KEY_ENV, "sk-fault-test")
        yield server


def finished_search(service, rows: list[dict] = SEARCH_ROWS) -> str:
    """The id of a finished ``bm25`` search for "honey" by the local user, with ``rows`` as its result, written to
    ``service``'s task store as a task worker writes it."""
    task_id = service.store.create_task("local", "bm25", {"steps": {}}, [{"qid": "1", "query": "honey"}], ["bm25"])
    service.store.finish(task_id, "finished", result={"data": rows, "result_description": {}, "aggregated_data": {},
                                                      "metadata": {}})
    return task_id


#: One document for the upload tests (``upload``).
UPLOAD_DOCS = [{"id": "bees", "title": "Bees", "text": "honey bees make honey from nectar"}]


@pytest.fixture
def upload_service(tmp_path, monkeypatch):
    """A ``Service`` for the upload tests (failed, interrupted, cancelled): ``$TESSERA_HOME`` under ``tmp_path``, a
    real SQLite task store, no default index and no spare workers (a test that runs tasks on Ray starts each one)."""
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0)
    return Service(resolve(args, environ={}), [], "tessera")


#: The two documents of the small BM25 indices the service tests search (bees, then ants).
TWO_DOCUMENTS = {"docno": ["bees#0", "ants#0"], "doc_id": ["bees", "ants"], "title": ["Bees", "Ants"],
                 "text": ["honey bees make honey from nectar", "ants farm aphids for honeydew"]}


def two_document_index(path: Path, **columns) -> None:
    """A real BM25 index (no vectors) of ``TWO_DOCUMENTS`` at ``path``, as an ingestion commits it, with ``columns``
    beside them (``year=pa.array([2024, 2020])``)."""
    import pyarrow as pa

    from operators.store import Index, IndexSettings

    Index.create(path, IndexSettings(dense=False)).add(pa.table({**TWO_DOCUMENTS, **columns}))


@pytest.fixture
def notes_api(make_service):
    """The service's HTTP API on localhost (its base URL) with one index, ``notes``: ``two_document_index``."""
    service = make_service()
    two_document_index(service.indices.folder / "notes")
    with api_on_localhost() as url:
        yield url


def run_search(body: dict, tenant: str) -> dict:
    """``body`` searched as ``POST /v1/search`` does, for ``tenant`` of the last ``Service`` made, without HTTP (what
    the route adds: its thread pools, a client that goes away)."""
    from serve import service as svc
    from serve.routes.search import searched

    return searched(svc.current().prepare(body, tenant, search=True))


def uploaded_index(service, name: str = "notes") -> Path:
    """``two_document_index`` as the index ``name`` of ``service``, with the owner file and the task store's row an
    upload makes (owned by ``local``): its folder."""
    from serve.indices.index_owner import write_owner

    path = service.indices.folder / name
    two_document_index(path)
    row = {"name": name, "owner": "local", "shared": False, "spec": "ingest", "created": time.time(),
           "ingest_task": None}
    write_owner(path, row)
    assert service.store.restore_index(row)
    return path


def upload(service, name: str, tenant: str, docs: list[dict] = UPLOAD_DOCS) -> tuple[str, dict]:
    """Upload ``docs`` into index ``name`` as ``tenant`` through ``service`` (queued, not run): the task id and its
    job (``index_path``, ``source``, ...)."""
    from serve.indices.documents import DocumentsRequest

    queued = service.indices.add(name, DocumentsRequest.model_validate({"documents": docs}), tenant)
    return queued["task_id"], service.store.task(queued["task_id"], None)["spec"]["ingest"]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


# -- a slow step for the task tests -----------------------------------------------------------------------------


class SlowRerankServer:
    """``POST /rerank`` (Cohere's body) answered after ``seconds``; ``times`` holds when each request arrived."""

    def __init__(self, seconds: float = 0.25):
        self.seconds = seconds
        self.times: list[float] = []
        outer = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:  # noqa: N802
                outer.times.append(time.monotonic())
                body = self.read_json()
                time.sleep(outer.seconds)
                self.answer_json(200, {"results": [{"index": i, "relevance_score": 1.0 / (i + 1)}
                                                   for i in range(len(body["documents"]))]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/rerank"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "SlowRerankServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def slow_flow(self, candidates: int = 40) -> dict:
        """A flow whose rerank step makes ``candidates`` requests of ``seconds`` each, one after another."""
        return {"name": "slow", "steps": {
            "bm25": {"op": "retrieve.bm25", "params": {"k": candidates}},
            "slow": {"op": "rerank.api", "params": {"url": self.url, "n": candidates, "max_documents_per_request": 1,
                                                    "concurrent_requests": 1, "max_retries": 0}},
        }}


@pytest.fixture
def slow_rerank():
    """A SlowRerankServer on a free port for one test (see the class)."""
    with SlowRerankServer() as server:
        yield server


class WatchedStore(TaskStore):
    """The real store, keeping what ``/task/progress/{id}`` answered after each write to the task."""

    def __init__(self, url: str):
        super().__init__(url)
        self.answers: list[dict] = []

    def update(self, task_id: str, **values) -> bool:
        written = super().update(task_id, **values)
        self.answers.append(progress_body(self.task(task_id, None))["progress"])
        return written


def chat_app() -> Any:
    """An app with only the chat routes (OpenAI's ``/v1/chat/completions``, Cohere's ``/v2/chat``) over the current
    service, with the service's error handlers and no key guard: a chat body's checks, seen as a client sees them.
    (``chat`` and ``cohere_chat`` are imported with the module: FastAPI reads the routes' annotations there.)"""
    from fastapi import FastAPI

    from serve.http import error_handlers

    app = FastAPI()
    error_handlers.install(app)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: chat.ChatRequest) -> Any:
        return await chat_flows.flow_response(chat.chat_target(body.model, {}, "local"), body, "local")

    @app.post("/v2/chat")
    async def chat_v2(body: cohere_chat.CohereChatRequest) -> Any:
        return await cohere_chat.respond(body, chat.chat_target(body.model, {}, "local"), None, "local")

    return app
