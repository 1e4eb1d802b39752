"""``tessera serve [--config serve/config.yaml] [--host H] [--port P] [--index I]``: the HTTP service.

A shortcut for ``serve run CONFIG``: it applies the overrides to a copy of the config,
checks that a non-loopback host has API keys and, before anything starts, that the port is free
(Ray's proxy binds with ``SO_REUSEPORT``: a second service on a taken port would silently get half of
its requests), that the task store and ``$TESSERA_MODELS`` can be opened; then it runs Ray Serve's own
``serve run`` as its child, so the service is exactly what ``serve run`` starts, and the engine never
imports the ``serve`` package. The child runs ``serve run`` under a drain (``serve_drain``): on SIGTERM (systemd,
Kubernetes) or SIGINT, the requests in flight finish, up to ``--grace-period``, before Serve shuts down; this
process stays the parent to turn SIGTERM into that SIGINT (``serve_process``). Relative paths in the config (the
default index) are resolved here, against the directory the command runs in.

The app is built in a Ray task and served by replicas whose environment is the raylet's, not
this shell's: on a cluster that was already running (``--address``), ``$TESSERA_API_KEYS``,
``$TESSERA_HOME`` and the rest would never reach them. So the environment travels in the
config: the keys as SHA-256 hashes in ``args.service.api_keys`` (the raw keys are dropped from
this process before ``serve run`` starts), the other settings in each application's
``runtime_env.env_vars`` (``CARRIED``). Secrets a flow may read by name (``$TESSERA_ALLOW_ENV``'s
variables, a model alias's ``api_key_env``) are not written to the file: on a cluster they
must be set where the Ray nodes start.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import subprocess
import sys
from pathlib import Path

from flows.commands._support import CliError, require_extra
from flows.commands.serve_checks import (check_gpus, check_named_index, check_port, check_roots, check_setting_names,
                                         check_task_stores, checked_address, home_readable_by_others,
                                         home_set_by_config)
from flows.commands.serve_process import DEFAULT_GRACE_PERIOD_S, run_serve, runner_command
from flows.commands.serve_store_lock import hold_task_stores
from operators.api_keys import KEYS_ENV, env_key_id, env_keys, env_keys_problem, key_hash
from operators.errors import SettingError

#: The config ``tessera serve`` starts when given none: ./serve/config.yaml, else the one beside the package.
LOCAL_CONFIG = Path("serve/config.yaml")
PACKAGED_CONFIG = Path(__file__).resolve().parents[2] / "serve" / "config.yaml"


def config_source(given: Path | None) -> Path:
    """The Serve config ``tessera serve`` runs, and in which ``tessera keys`` finds its keys and task store: ``given``,
    else ./serve/config.yaml, else the packaged one."""
    return given or (LOCAL_CONFIG if LOCAL_CONFIG.is_file() else PACKAGED_CONFIG)
#: Settings the app and its replicas read, copied from this environment into ``runtime_env.env_vars`` when set
#: (``TESSERA_HOME`` and ``TESSERA_OUTBOUND`` always are). Paths among them are made absolute here.
CARRIED = ("TESSERA_ALLOW_HOSTS", "TESSERA_ALLOW_ENV", "TESSERA_MODELS", "TESSERA_LLM_THREADS",
           "TESSERA_PLACEMENT_TIMEOUT_S", "TESSERA_NODE_LOSS_GRACE_S", "TESSERA_QUERY_ENCODER")
CARRIED_PATHS = ("TESSERA_MODELS",)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("serve", parents=[common], help="start the HTTP service (Ray Serve)",
                            description="Start the Tessera service: the task, search, flow and model API on Ray "
                            "Serve, with OpenAPI docs at /docs. Same as `serve run serve/config.yaml`, with "
                            "overrides.")
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="Serve config (default: ./serve/config.yaml, else the packaged one)")
    parser.add_argument("--host", help="interface to listen on (default: the config's, 127.0.0.1); any other than "
                        "loopback needs API keys (args.service.api_keys or $TESSERA_API_KEYS)")
    parser.add_argument("--port", type=port_number, help="port, 1-65535 (default: the config's, 8000)")
    parser.add_argument("--index", "-i", metavar="NAME_OR_PATH", help="index for the retrieval steps that name none")
    parser.add_argument("--address", help="Ray cluster to run on (default: as `serve run`; 'local' starts one)")
    parser.add_argument("--grace-period", type=grace_seconds, default=DEFAULT_GRACE_PERIOD_S, metavar="SECONDS",
                        help="on SIGTERM or Ctrl-C, how long the requests in flight may take to finish before Serve "
                        f"shuts down; new ones get 503 meanwhile, a second signal stops waiting (default: "
                        f"{DEFAULT_GRACE_PERIOD_S:g}; 0: no wait)")
    parser.add_argument("--print-config", action="store_true", help="print the config it would run, and exit")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    require_extra("serve", ("fastapi", "starlette"))
    source = config_source(args.config)
    config = read_config(source)
    apply_overrides(config, host=args.host, port=args.port, index=args.index)
    carry_environment(config, os.environ)
    check_keys(config)
    from operators.home import tessera_home

    given_home = bool(os.environ.get("TESSERA_HOME", "").strip())
    if note := home_set_by_config(config, tessera_home(), given_home):  # the config's wins: said, printed or not
        print(note, file=sys.stderr)
    http = config.get("http_options") or {}
    port = int(http.get("port", 8000))
    # on another machine's cluster, these are that machine's; printing the config starts nothing
    if not args.print_config and local_cluster(checked_address(args.address), os.environ):
        check_roots(config)
        check_port(str(http.get("host", "127.0.0.1")), port)
        check_named_index(args.index)
        check_task_stores(config)
        held = hold_task_stores(config)  # noqa: F841 - for as long as this process runs
        check_models_file(os.environ)
        check_gpus(config, args.address, os.environ)
    check_app_args(config, source)  # last: it costs a child process (about 1 s)
    import yaml

    text = yaml.safe_dump(config, sort_keys=False)
    if args.print_config:
        print(text, end="")
        return 0
    # `serve run` reads a file: one per port under $TESSERA_HOME, rewritten by the next start, rather than one
    # more in /tmp each time.
    path = tessera_home() / "serve" / f"config-{port}.yaml"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)  # the keys' hashes and the service's settings: its user's only
        path.chmod(0o600)
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise CliError(f"cannot write the config it runs to {path}: {err.strerror or err} (TESSERA_HOME is "
                       f"{tessera_home()})", field="TESSERA_HOME") from None
    command = runner_command(str(path), args.address, args.grace_period)
    # The service runs specs that come from the network: outbound URLs reach public addresses only
    # (operators/outbound.py's "server" policy); TESSERA_ALLOW_HOSTS names the exceptions.
    env = {k: v for k, v in os.environ.items() if k != KEYS_ENV}  # hashed into the config: no raw key reaches Ray
    env["TESSERA_OUTBOUND"] = "server"
    # read by the GCS that `serve run --address local` starts: ended actors are kept up to 100,000 (about 40 KB
    # each) by default; docs/cluster.md#dead-actors
    env.setdefault("RAY_maximum_gcs_destroyed_actor_cached_count", "1000")
    secrets = [name.strip() for name in os.environ.get("TESSERA_ALLOW_ENV", "").split(",") if name.strip()]
    if args.address and args.address != "local" and secrets:
        print(f"tessera serve: not carried to the cluster (secrets): ${', $'.join(secrets)}; set them where its "
              "Ray nodes start", file=sys.stderr)
    if note := home_readable_by_others(config, tessera_home()):
        print(note, file=sys.stderr)
    ui = ui_address(config)
    print(f"tessera serve: once the app is up, the web UI is at {ui}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    return run_serve(command, env, ready_url=ui.removesuffix("ui/") + "healthz")  # a line says when it is ready


def is_port(value: object) -> bool:
    """Whether ``value`` (text or a number) is a TCP port, 1-65535 (0 would be an unnamed port, not the config's)."""
    return str(value).isdigit() and 1 <= int(value) <= 65535


def port_number(text: str) -> int:
    """``--port``: a TCP port (``is_port``)."""
    if not is_port(text):
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, got {text!r}")
    return int(text)


def grace_seconds(text: str) -> float:
    """``--grace-period``: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, got {text!r}")
    return value


def read_config(source: Path) -> dict:
    """The Serve config at ``source``, a mapping whose ``http_options`` and ``applications`` have the shapes the
    command changes; a broken file is one line naming it."""
    import yaml

    from operators.yaml_text import syntax_hint

    try:
        config = yaml.safe_load(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"no Serve config at {source}", field="config") from None
    except UnicodeDecodeError as err:  # Notepad's Windows-1252: it was an internal error
        from operators.sources.encoding import not_utf8_at, save_as_utf8

        raise CliError(f"the Serve config {source} is not UTF-8 text ({not_utf8_at(err)}); {save_as_utf8(err.object)}",
                       field="config") from None
    except OSError as err:
        raise CliError(f"cannot read the Serve config {source}: {err.strerror or err}", field="config") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise CliError(f"the Serve config {source} is not valid YAML{where}: {problem}{syntax_hint(err)}",
                       field="config") from None
    config = {} if config is None else config
    if not isinstance(config, dict):
        raise CliError(f"the Serve config {source} is a YAML {type(config).__name__}, not a mapping of Serve "
                       "settings (http_options, applications, ...)", field="config")
    http = config.get("http_options")
    if http is not None and not isinstance(http, dict):
        raise CliError(f"{source}: http_options must be a mapping (host, port)", field="http_options")
    if http and "port" in http and not is_port(http["port"]):
        raise CliError(f"{source}: http_options.port must be a port number from 1 to 65535, not {http['port']!r}",
                       field="http_options.port")
    applications = config.get("applications")
    if applications is not None and (not isinstance(applications, list) or not all(
            isinstance(a, dict) and isinstance(a.get("args") or {}, dict)
            and isinstance((a.get("args") or {}).get("service") or {}, dict)
            and isinstance(a.get("runtime_env") or {}, dict) for a in applications)):
        raise CliError(f"{source}: applications must be a list of mappings, each with mappings for args, "
                       "args.service and runtime_env", field="applications")

    check_setting_names(config, source)
    return config


def local_cluster(address: str | None, environ) -> bool:
    """Whether Serve's proxy and replicas run on this machine: a new cluster (``local``), the local default, or an
    address on loopback."""
    address = address or environ.get("RAY_ADDRESS") or "local"
    if address in ("local", "auto"):
        return True
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return _loopback(host)


def check_models_file(environ) -> None:
    """``$TESSERA_MODELS``, when set, must name a readable file: the service would fail on it after starting."""
    value = (environ.get("TESSERA_MODELS") or "").strip()
    if not value:
        return
    path = Path(value).expanduser()
    try:
        with path.open("rb"):
            pass
    except OSError as err:
        raise CliError(f"TESSERA_MODELS names {path}, which cannot be read: {err.strerror or err}",
                       field="TESSERA_MODELS") from None
    if not path.is_file():
        raise CliError(f"TESSERA_MODELS names {path}, which is not a file", field="TESSERA_MODELS")
    from operators.llm.aliases import ModelConfigError, read_models_file

    try:  # a malformed file failed each step that names a model, in the replicas
        read_models_file(path)
    except ModelConfigError as err:
        raise CliError(err.message, field="TESSERA_MODELS") from None


def ui_address(config: dict) -> str:
    """Where a browser finds the web UI: the service application's route prefix on the HTTP address."""
    http = config.get("http_options") or {}
    host, port = str(http.get("host", "127.0.0.1")), int(http.get("port", 8000))
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    prefix = next((str(a.get("route_prefix") or "/") for a in config.get("applications") or []
                   if (a.get("args") or {}).get("service") is not None), "/")
    return f"http://{shown}:{port}{prefix.rstrip('/')}/ui/"


def apply_overrides(config: dict, *, host: str | None, port: int | None, index: str | None) -> None:
    from flows.task_store_url import absolute_task_store_url
    from operators.store import resolve_index
    from operators.store.layout import DEMO_INDEX, default_index

    http = config.setdefault("http_options", {})
    # Serve's own default host is 0.0.0.0: name the one this command checks (keys, port) and prints.
    http.setdefault("host", "127.0.0.1")
    if host:
        http["host"] = host
    if port is not None:
        http["port"] = port
    for application in config.get("applications") or []:
        service = (application.setdefault("args", {}) or {}).get("service", {})
        if service is None:  # models only
            continue
        application["args"]["service"] = service
        if isinstance(service.get("task_store"), str):  # checked, locked and opened as the same file
            service["task_store"] = absolute_task_store_url(service["task_store"])
        value = index or service.get("default_index", DEMO_INDEX)
        if value == DEMO_INDEX:  # make demo's, in the working folder; else $TESSERA_HOME's 'sample', if there
            value = default_index()
        if value:
            service["default_index"] = str(Path(resolve_index(value)).resolve())


def carry_environment(config: dict, environ) -> None:
    """Put what this environment configures into the config, so it holds wherever the app is built: the raw
    keys of ``$TESSERA_API_KEYS`` as hashes in each service's ``api_keys`` (ids ``env-<hash prefix>``, as
    ``serve.service_settings.resolve`` names them), and ``$TESSERA_HOME``, the outbound policy and ``CARRIED``
    in each application's ``runtime_env.env_vars`` (a value the config sets itself is kept)."""
    from operators.home import tessera_home

    if problem := env_keys_problem(environ):
        raise CliError(problem, field=KEYS_ENV)
    check_carried(environ)
    digests = [key_hash(raw) for raw in env_keys(environ)]
    env = {"TESSERA_HOME": str(tessera_home().resolve()), "TESSERA_OUTBOUND": "server"}
    for name in CARRIED:
        if (environ.get(name) or "").strip():
            value = environ[name].strip()
            env[name] = str(Path(value).expanduser().resolve()) if name in CARRIED_PATHS else value
    for application in config.get("applications") or []:
        runtime_env = application.get("runtime_env") or {}
        application["runtime_env"] = runtime_env
        runtime_env["env_vars"] = {**env, **{k: str(v) for k, v in (runtime_env.get("env_vars") or {}).items()}}
        try:
            check_carried(runtime_env["env_vars"])
        except SettingError as err:
            raise CliError(f"{err} in application '{application.get('name')}'", field="runtime_env.env_vars") \
                from None
        if KEYS_ENV in runtime_env["env_vars"]:
            raise CliError(f"{KEYS_ENV} in runtime_env.env_vars would send raw keys to every replica: put their "
                           f"sha256 in args.service.api_keys (or set {KEYS_ENV} where tessera serve runs)",
                           field="runtime_env")
        service = (application.get("args") or {}).get("service")
        if service is None or not digests:
            continue
        service["api_keys"] = with_env_keys(service.get("api_keys") or [], digests)


def with_env_keys(entries: list, digests: list[str]) -> list:
    """A service's ``api_keys`` ``entries`` and, after them, the keys with hashes ``digests`` that they lack, with the
    ids the service gives them (``env-<hash prefix>``, longer where one is taken): ``tessera keys revoke`` finds the
    keys by these ids too."""
    keys = list(entries)
    known, ids = {k.get("sha256") for k in keys}, {k.get("id") for k in keys}
    for digest in digests:
        if digest not in known:
            key_id = env_key_id(digest, ids)
            keys.append({"id": key_id, "sha256": digest})
            ids.add(key_id)
    return keys


def check_carried(env_vars) -> None:
    """The values among ``CARRIED`` (numbers, the query encoder's mode, the allowed hosts), refused here, before Serve
    starts, not in each replica that reads them: read by the functions that read them there. (The models file is a
    path of this machine: ``check_models_file``, on a local start.)"""
    from flows.executors.ray_nodes import node_loss_grace_s
    from flows.placement import call_timeout_s
    from operators._outbound_policy import ALLOW_ENV, OutboundPolicy, OutboundURLError
    from operators.llm.embedded_model import threads_setting
    from operators.models.onnx_query_encoder import FastPathUnavailable, query_encoder_mode

    threads_setting(env_vars)
    call_timeout_s(env_vars)
    node_loss_grace_s(env_vars)
    try:
        query_encoder_mode(env_vars)
        OutboundPolicy.parse(env_vars.get(ALLOW_ENV, ""))
    except (FastPathUnavailable, OutboundURLError) as err:
        raise SettingError(err.message) from None


def check_app_args(config: dict, source: str | Path | None = None) -> None:
    """Each Tessera application's ``args`` valid before Ray starts; the error names the config file ``source``."""
    if (problem := app_args_problem(config)) is not None:
        raise CliError(f"{f'{source}: ' if source else ''}{problem['message']} (application "
                       f"'{problem['application']}')", field=problem["field"])


def app_args_problem(config: dict) -> dict | None:
    """``serve.check_args``' first invalid ``args`` (``{"application", "field", "message"}``), from a child process
    (the CLI does not import the service's package); None if all are valid or the check cannot run (then the app's
    builder checks them, as before)."""
    import json

    try:
        done = subprocess.run([sys.executable, "-m", "serve.check_args"], input=json.dumps(config, default=str),
                              text=True, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    ok = done.returncode != 2 or not done.stdout.strip()
    return None if ok else json.loads(done.stdout.strip().splitlines()[-1])


def check_keys(config: dict) -> None:
    """Refuse a non-loopback host when an application would answer without API keys (open to anyone): its
    service has none (``$TESSERA_API_KEYS`` is already in it, ``carry_environment``) or it has no service
    (``service: null``, whose model routes take no keys)."""
    host = str((config.get("http_options") or {}).get("host", "127.0.0.1"))
    if _loopback(host):
        return
    for application in config.get("applications") or []:
        args = application.get("args") or {}
        service = args.get("service") or {}
        if not service.get("api_keys") and not service.get("allow_public_without_keys"):
            name = application.get("name", "?")
            reason = ("has no service (args.service: null), so its model routes take no keys" if
                      "service" in args and args["service"] is None else
                      f"has none: set args.service.api_keys (hashed) in the config or {KEYS_ENV}")
            raise CliError(f"refusing to listen on {host} without API keys: application '{name}' {reason}, or "
                           "listen on 127.0.0.1", field="host")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
