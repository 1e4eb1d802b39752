"""Checks of a service about to start that Serve itself does not make.

* The Serve config's own setting names: Ray's schema ignores a key it does not know, so ``http_options: {hots:
  0.0.0.0}`` started the service on 127.0.0.1 without a word, and a misspelt ``route_prefx`` was dropped. The names
  come from Ray's own schema classes, so a new Ray's settings are accepted as they come; Tessera's ``args`` are
  checked by its own models (``serve.check_args``).
* The values Serve's schema refuses (``num_replicas: 0`` in a ``deployments`` entry): ``serve run`` validated them
  only itself, with pydantic's traceback.
* A ``$TESSERA_HOME`` other users of the machine may list or read, when the service has tenants (a warning).
* The cluster ``--address`` (else ``RAY_ADDRESS``) names: ``serve run`` printed Ray's traceback for the job server's
  ``http://`` address, and waited minutes on one where nothing listens.
* The port, the task stores, and an index named by ``--index``: each failed only after Ray and Serve had started."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from flows.commands._support import CliError
from operators.error_text import close_names
from operators.errors import see_docs, unknown_name_hint


def _fields(schema: type) -> set[str]:
    fields = getattr(schema, "model_fields", None) or getattr(schema, "__fields__", {})
    return set(fields)


def check_setting_names(config: dict[str, Any], source: Path) -> None:
    """Refuse the first key of ``config`` that Serve's schema does not have (top level, ``http_options``, each
    application, each of its deployments), naming where it is and the closest known name."""
    from ray.serve.schema import DeploymentSchema, HTTPOptionsSchema, ServeApplicationSchema, ServeDeploySchema

    def check(mapping: Any, schema: type, where: str, app: bool = False) -> None:
        if not isinstance(mapping, dict):
            return  # read_config names a wrong shape
        known = _fields(schema)
        for key in mapping:
            if key not in known:
                field = f"{where}.{key}" if where else str(key)
                # `service:` beside `args:` rather than under it: Serve's close names alone did not say where it goes
                under_args = app and not close_names(str(key), known)
                raise CliError(f"{source}: unknown Serve setting '{field}'"
                               + (f"; the app's own settings (service, models, llms, ...) go under args: move it to "
                                  f"{where}.args.{key}" if under_args else "")
                               + unknown_name_hint(str(key), sorted(known), "settings"), field=field)

    check(config, ServeDeploySchema, "")
    check(config.get("http_options"), HTTPOptionsSchema, "http_options")
    for n, application in enumerate(config.get("applications") or []):
        check(application, ServeApplicationSchema, f"applications.{n}",
              app=isinstance(application, dict) and application.get("import_path") == "serve.app:build_app")
        for m, deployment in enumerate((application or {}).get("deployments") or []):
            check(deployment, DeploymentSchema, f"applications.{n}.deployments.{m}")
    check_setting_values(config, source)


def check_setting_values(config: dict[str, Any], source: Path) -> None:
    """Refuse the first value Serve's own schema refuses (``serve run`` validates the file the same way, but with a
    traceback), naming its setting as the file writes it."""
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    try:
        ServeDeploySchema.model_validate(config)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(_written_part(config, first["loc"]))
        raise CliError(f"{source}: {first['msg'].removeprefix('Value error, ')}", field=field or "config") from None


def _written_part(config: Any, loc: tuple) -> list[str]:
    """The part of pydantic's ``loc`` that names keys and items of ``config`` (a union's error adds the member it
    tried, such as ``constrained-int``, which is no setting)."""
    parts, node = [], config
    for part in loc:
        if (isinstance(node, dict) and part in node) or (isinstance(node, list) and isinstance(part, int)
                                                         and part < len(node)):
            node = node[part]
            parts.append(str(part))
            continue
        if isinstance(node, dict) and str(part).isidentifier():
            parts.append(str(part))  # a required setting that is absent
        break
    return parts


def _has_api_keys(application: dict) -> bool:
    service = (application.get("args") or {}).get("service") or {}
    return bool(service.get("api_keys"))


def home_readable_by_others(config: dict, home: Path) -> str | None:
    """A warning when the service has keys (tenants) and other users of the machine may read ``$TESSERA_HOME``. The
    service makes what it writes private (``serve.security.private_files``), but an open folder still shows others the
    names in it (indices, uploads, the keys' ids of saved flows), and what was written there before, or by the CLI
    (indices of ``tessera ingest``), keeps its umask's modes (docs/security.md)."""
    if not any(_has_api_keys(application) for application in config.get("applications") or []):
        return None
    try:
        mode = home.stat().st_mode & 0o777
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return (f"tessera serve: {home} is open to other users of this machine (mode {mode:o}): the service makes its "
            "own files private, but others can list the names of the keys' indices, uploads and saved flows, and "
            f"read what was written there before this version or by the CLI: chmod 700 {home}; see "
            f"{see_docs('security')}")


def home_set_by_config(config: dict, home: Path, given: bool) -> str | None:
    """A warning when an application's ``runtime_env`` sets a ``TESSERA_HOME`` other than this shell's (``home``;
    ``given``: set in the environment, not the default) or one that is not there: the config's wins, so a config
    printed before the home was moved or restored elsewhere ran the service on the old home (its task store, indices
    and uploads; made again, empty, where it had been removed) without a word. A config that sets its own home,
    started from a shell that sets none, is taken as meant."""
    from flows.task_store_url import app_home

    for application in config.get("applications") or []:
        own = app_home(application)
        there = bool(own) and Path(own).expanduser().exists()
        if own and Path(own).expanduser().resolve() != home.resolve() and (given or not there):
            gone = "" if there else " (not there: the service will make it, empty)"
            return (f"tessera serve: warning: application '{application.get('name')}' sets TESSERA_HOME={own} in "
                    f"its runtime_env{gone}; the service reads and writes there (task store, indices, uploads), "
                    f"not in this shell's TESSERA_HOME={home}: remove that line from the config to use {home}")
    return None


def checked_address(address: str | None) -> str | None:
    """``address`` as given, once ``flows.executors.ray_address`` found that Ray can join it (``RAY_ADDRESS`` when
    it is None); a ``RayAddressError`` naming the setting otherwise, a cluster that refuses this process's token
    among them (``serve run`` failed there after about 20 s, with Ray's traceback)."""
    from flows.executors.ray_address import check_ray_address

    check_ray_address(address, job_hint=False)
    return address


def check_gpus(config: dict[str, Any], address: str | None, environ) -> None:
    """Refuse a model that asks for more GPUs than this machine has when ``serve run`` starts its own Ray here (no
    cluster to join): its replica would wait for a GPU forever and the app never become ready (Serve's warning, the
    model ``loading`` in ``/healthz``). On a cluster the request stays: a pending GPU replica is what makes an
    autoscaler start a GPU node (docs/serving.md, GPUs)."""
    if not _starts_own_cluster(address, environ):
        return
    from ray._private.accelerators import get_accelerator_manager_for_resource

    have = get_accelerator_manager_for_resource("GPU").get_current_node_num_accelerators()
    for field, asked in _gpu_requests(config):
        if asked > have:
            raise CliError(f"it asks for {asked:g} GPU per replica, but this machine has {have} and `tessera serve` "
                           "starts its own Ray here: the replica would wait for a GPU forever; remove num_gpus (CPU "
                           "replicas) or run on a cluster with GPU nodes (--address)", field=field)


def _starts_own_cluster(address: str | None, environ) -> bool:
    """Whether ``serve run`` starts a new Ray on this machine rather than joining one: ``local``, or no address
    and no cluster that Ray's own lookup would join (``ray_address.found_cluster``, as the address check finds it)."""
    from flows.executors.ray_address import found_cluster, given_address

    value, setting = given_address(address, environ)
    value = value.strip().lower()
    return value == "local" or (value == "" and found_cluster(value, setting) is None)


def _gpu_requests(config: dict[str, Any]) -> list[tuple[str, float]]:
    """Each GPU request of Tessera's applications: a model's ``num_gpus`` and a deployment override's."""
    asks = []
    for n, application in enumerate(config.get("applications") or []):
        if application.get("import_path") != "serve.app:build_app":
            continue
        for m, model in enumerate((application.get("args") or {}).get("models") or []):
            if isinstance(model, dict) and isinstance(model.get("num_gpus"), (int, float)) and model["num_gpus"] > 0:
                asks.append((f"applications.{n}.args.models.{m}.num_gpus", float(model["num_gpus"])))
        for m, override in enumerate(application.get("deployments") or []):
            gpus = ((override or {}).get("ray_actor_options") or {}).get("num_gpus")
            if isinstance(gpus, (int, float)) and gpus > 0:
                asks.append((f"applications.{n}.deployments.{m}.ray_actor_options.num_gpus", float(gpus)))
    return asks


def check_port(host: str, port: int) -> None:
    """Refuse a port something already has. The test bind leaves out ``SO_REUSEPORT``, so it fails on a port
    that another Ray Serve proxy holds (it binds with it, and the kernel would share the port between the two,
    splitting requests); the connection probe catches a listener on another address of this machine."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as err:
        raise CliError(f"cannot resolve the host {host!r}: {err.strerror}", field="http_options.host") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed socket's TIME_WAIT is no owner
        try:
            probe.bind(address)
        except OSError as err:
            raise CliError(f"port {port} on {host} is not free ({err.strerror}): another process (another "
                           "tessera serve?) has it; stop it or pick another --port", field="port") from None
    target = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    try:
        with socket.create_connection((target, port), timeout=2):
            pass
    except OSError:
        return
    raise CliError(f"port {port} on {target} accepts connections: another process (another tessera serve?) has "
                   "it; stop it or pick another --port", field="port")


def check_task_stores(config: dict) -> None:
    """Open each task store (``args.service.task_store``, default ``$TESSERA_HOME/tasks.db``) before Serve starts
    (``flows.task_store_check``): a SQLite folder that cannot be made or a file that is no database would keep the
    api deployment retrying forever; a database server that refuses, drops packets or rejects the login would
    fail the build only after Ray and Serve had started."""
    from flows.task_store_check import task_store_problem
    from flows.task_store_url import app_home, default_task_store_url

    for application in config.get("applications") or []:
        service = (application.get("args") or {}).get("service")
        if service is None:
            continue
        given = bool(service.get("task_store"))
        default = default_task_store_url(app_home(application))  # the app's home: the config's, else this shell's
        problem = task_store_problem(str(service.get("task_store") or default), default=not given)
        if problem:
            raise CliError(problem, field="args.service.task_store" if given else "TESSERA_HOME")


def check_named_index(index: str | None) -> None:
    """An index named by ``--index`` must be there, as ``tessera run --index`` requires: the service started (a
    minute of model loading on 2 cores) and then answered every search that used it with a 503. The config's own
    default may be missing (a service whose users name their indices, or upload them)."""
    if not index:
        return
    from operators.errors import TesseraError
    from operators.store.layout import check_index_exists

    try:
        check_index_exists(index)  # as Flow.load checks its index=: the manifest read, nothing loaded
    except TesseraError as err:
        raise CliError(err.message, field="--index") from None


def check_roots(config: dict) -> None:
    """Each folder ``args.service.index_roots`` and ``data_roots`` name must be one, relative ones where the app is
    built (here): a misspelt root started the service, which then answered every request naming an index or a file
    there with a 404 or a 422, and nothing at start said that the folder was not there."""
    for application in config.get("applications") or []:
        service = (application.get("args") or {}).get("service") or {}
        for setting in ("index_roots", "data_roots"):
            roots = service.get(setting)
            for n, root in enumerate(roots if isinstance(roots, list) else []):
                if not isinstance(root, str):
                    continue  # the settings' own check names a value of another kind
                path = Path(root).expanduser().resolve()
                if not path.is_dir():
                    what = "is a file, not a folder" if path.exists() else "does not exist"
                    raise CliError(f"{root!r} {what}{'' if str(path) == root else f' ({path})'}: create the folder "
                                   f"or fix the path", field=f"args.service.{setting}.{n}")
