"""MLflow logging: one run per flow in the experiment ``tessera-bench-<dataset>``.

Params: the flow's spec summary and source, dataset, split, queries, cutoffs, the run
key and whether it came from the cache. Metrics: every measure's mean (``@`` is not
allowed in MLflow names: ``nDCG@10`` is logged as ``nDCG_at_10``). Artifacts: the
report, its plots and ``metrics.json``.

The default store is SQLite, ``<out>/mlflow.db``, with artifacts in ``<out>/mlartifacts``
(MLflow's recommended local store; MLflow 3 refuses file stores unless
``MLFLOW_ALLOW_FILE_STORE`` is set, which is done for ``file:`` URIs given on purpose). The
store is opened before any flow runs, so a missing dependency (alembic for SQL stores) or an
unreachable server costs nothing. A SQLite store's first open is serialised across processes by a
lock file beside it (``mlflow.db.lock``), so two benchmarks into one new store both succeed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from flows.bench.errors import BenchError
from flows.sqlite_urls import sqlite_file, sqlite_url

if TYPE_CHECKING:
    from flows.bench.results import BenchResult

#: SQLAlchemy URI schemes MLflow stores runs in through a database (its migrations need alembic).
SQL_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
STORE_FILE = "mlflow.db"  # the default store, in a benchmark's --out


def metric_name(measure: str) -> str:
    return measure.replace("@", "_at_")


def default_uri(out: Path) -> str:
    """``<out>/mlflow.db``'s URL, its path quoted where it holds ``%``, ``?`` or ``#`` (``flows.sqlite_urls``): the
    database and its artifacts went beside ``--out`` (``/data/run #1`` wrote ``/data/run ``). Such a URL names its
    driver, ``sqlite+pysqlite:``, the same store: MLflow makes a ``sqlite:///`` store's folders from the URL's text,
    quotes and all, so ``/data/run %231`` was made, empty, beside ``/data/run #1``."""
    path = (Path(out).resolve() / STORE_FILE).as_posix()
    url = sqlite_url(path)
    return url if url == f"sqlite:///{path}" else url.replace("sqlite:", "sqlite+pysqlite:", 1)


def _scheme(uri: str) -> str:
    """A tracking URI's scheme without its driver (``sqlite+pysqlite:`` is ``sqlite``); ``""`` for a path."""
    return urlparse(uri).scheme.split("+")[0]


def _database(uri: str) -> str | None:
    """The SQLite file of a ``sqlite:`` URI, as SQLAlchemy (MLflow's store) reads it; None for any other store.
    ``urlparse`` ended it at a ``#`` and left ``%XX`` undecoded, so the lock and the artifacts went elsewhere."""
    return sqlite_file(uri) if _scheme(uri) == "sqlite" else None


def store_path(uri: str | None) -> str | None:
    """The local path a tracking URI writes into, as given (a SQLite database, a file store), else None: in a Ray job
    a relative one lands in the job's temporary working directory, which Ray deletes (``flows.commands.bench``)."""
    scheme = _scheme(uri) if uri else None
    if scheme == "sqlite":
        return _database(uri)  # sqlite:////abs/mlflow.db -> /abs/mlflow.db; sqlite:///rel.db -> rel.db
    if scheme == "file":
        return urlparse(uri).path or None
    return uri if scheme == "" else None


def required_modules(uri: str | None) -> tuple[str, ...]:
    """The modules a tracking URI needs (the ``bench`` extra has them all)."""
    return ("mlflow", "alembic", "sqlalchemy") if (_scheme(uri) if uri else "sqlite") in SQL_SCHEMES else ("mlflow",)


@dataclass
class Tracker:
    """An opened store and the benchmark's experiment in it."""

    uri: str
    client: Any
    experiment_id: str


def open_tracker(uri: str | None, out: Path, dataset_name: str) -> Tracker:
    """Open (create) the store and the experiment; any failure is one line, before anything runs."""
    default, uri = uri is None, uri or default_uri(out)
    scheme = _scheme(uri)
    if scheme in ("file", ""):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    # MLflow announces the creation and migration of a new SQL store at INFO: not the user's news.
    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if scheme in ("http", "https"):
        _check_reachable(uri, urlparse(uri))
    if scheme == "sqlite":
        _check_writable(uri)
    try:
        from mlflow.tracking import MlflowClient

        with _first_open_lock(uri):
            if default:
                _follow_moved_store(Path(out).resolve() / STORE_FILE, _artifact_root(uri))
            client = MlflowClient(uri)
            name = f"tessera-bench-{dataset_name}"
            experiment = client.get_experiment_by_name(name)
            experiment_id = (experiment.experiment_id if experiment else
                             client.create_experiment(name, artifact_location=_artifact_root(uri)))
    except ImportError as err:
        raise BenchError(f"MLflow tracking to {uri} needs the 'bench' extra ({err}): pip install 'tessera[bench]', "
                         "or use --no-mlflow", field="mlflow-uri") from None
    except Exception as err:  # noqa: BLE001 - a bad URI, an unreachable server, a damaged database
        raise _refused(uri, f"{type(err).__name__}: {err}") from None
    return Tracker(uri, client, experiment_id)


def _refused(uri: str, why: str) -> BenchError:
    """The one line that refuses a tracking store, whatever its scheme."""
    return BenchError(f"cannot open the MLflow store {uri}: {why}", field="mlflow-uri")


def _check_writable(uri: str) -> None:
    """Refuse a SQLite store whose folder cannot be written, at once: MLflow retries creating its engine for about
    100 s, printing a warning each time, before it fails."""
    database = _database(uri)
    if database is None:
        return
    path = Path(database)
    folder = path.parent
    while not folder.exists() and folder != folder.parent:  # made by MLflow: the first folder that is there counts
        folder = folder.parent
    try:  # tried, not asked of os.access: root may write anywhere by its bits, but not into /proc
        if path.is_file():
            with open(path, "ab"):
                pass
        else:
            with tempfile.TemporaryFile(dir=folder):
                pass
    except OSError:
        raise _refused(uri, f"{path if path.is_file() else folder} cannot be written here; give another "
                       "--mlflow-uri, or --no-mlflow") from None


def _check_reachable(uri: str, parsed: Any) -> None:
    """Refuse a tracking server that takes no connection, at once: MLflow's client retries with a growing backoff,
    and a refused connection was said after about 4 minutes."""
    import socket

    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname or "localhost", port), timeout=10).close()
    except OSError as err:
        raise _refused(uri, f"no server answers at {parsed.hostname}:{port} ({err.strerror or err}); start it, or "
                       "use --no-mlflow") from None


@contextlib.contextmanager
def _first_open_lock(uri: str):
    """For a SQLite store, hold ``<db>.lock`` (``flock``) while the store is opened: MLflow creates and migrates a
    new database on first open, and two benchmarks doing that at once race (``duplicate column name``); the
    experiment's creation races the same way. Other stores (servers, databases) do their own locking."""
    database = _database(uri)
    if database is None:
        yield
        return
    try:
        import fcntl
    except ImportError:  # Windows: no flock; a lone benchmark needs none
        yield
        return
    lock_path = Path(database).expanduser().resolve().with_name(Path(database).name + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a", encoding="utf-8")
    except OSError:  # an unwritable folder: MLflow's own open names the problem
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _follow_moved_store(database: Path, root: str) -> None:
    """A default store names the artifact folder beside it where it was made; one moved with its folder (a
    remote --out's, copied down into a new temporary folder by each benchmark) would log new runs' artifacts
    there, outside the folder. Point its experiments and runs at the ``mlartifacts/`` beside it now (MLflow has
    no call that moves an experiment: its tables are updated, only where they name an old ``mlartifacts/``)."""
    import sqlite3

    if not database.is_file():
        return
    with contextlib.closing(sqlite3.connect(database)) as db, db:
        moved = db.execute("SELECT experiment_id, artifact_location FROM experiments WHERE artifact_location != ? "
                           "AND artifact_location LIKE 'file:%/mlartifacts'", (root,)).fetchall()
        for experiment_id, old in moved:
            db.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (root, experiment_id))
            db.execute("UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?) WHERE experiment_id = ? "
                       "AND substr(artifact_uri, 1, ?) = ?", (root, len(old) + 1, experiment_id, len(old) + 1,
                                                             old + "/"))


def _artifact_root(uri: str) -> str | None:
    """Beside a SQLite file: ``mlartifacts/`` (so a store is one folder); elsewhere MLflow's own choice."""
    database = _database(uri)
    if database is None:
        return None
    return (Path(database).resolve().parent / "mlartifacts").as_uri()


def log_benchmark(result: "BenchResult", tracker: Tracker) -> str:
    """One run per flow: params, every measure's mean, the report's files as artifacts."""
    import time

    from mlflow.entities import Metric, Param, RunTag

    from flows.bench.outputs import code_version

    client = tracker.client
    now = int(time.time() * 1000)
    code = code_version()  # tags tessera.version, tessera.commit, tessera.dirty
    artifacts = [p for key, p in result.files.items() if key.endswith((".md", ".png")) or key == "metrics.json"]
    for flow, fr in result.flows.items():
        run = client.create_run(tracker.experiment_id, run_name=flow, tags={"tessera.bench.flow": flow})
        params = {"flow": flow, "spec": fr.summary[:6000],
                  "source": fr.source, "dataset": str(result.dataset.root), "split": result.dataset.split,
                  "queries": len(result.dataset.qids), "ks": ",".join(map(str, result.ks)),
                  "run_key": fr.key, "cached": fr.run.cached,
                  "baselines": ",".join(result.baselines), "executor": result.options.executor,
                  "min_relevance": result.options.min_relevance}
        metrics = [Metric(metric_name(m), float(s.mean), now, 0) for m, s in result.summaries[flow].items()]
        metrics.append(Metric("run_seconds", float(fr.run.seconds), now, 0))
        if fr.run.step_cache_hits is not None:  # run_seconds of a run read mostly from the step cache is no timing
            metrics.append(Metric("step_cache_hits", float(fr.run.step_cache_hits), now, 0))
        client.log_batch(run.info.run_id, metrics=metrics, params=[Param(k, str(v)) for k, v in params.items()],
                         tags=[RunTag("tessera.bench.key", fr.key),
                               *(RunTag(f"tessera.{k}", str(v)) for k, v in code.items() if v is not None)])
        for path in artifacts:
            client.log_artifact(run.info.run_id, str(path))
        client.set_terminated(run.info.run_id)
    return tracker.uri
