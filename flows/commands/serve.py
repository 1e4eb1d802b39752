"""``tessera serve [--config serve/config.yaml] [--host H] [--port P] [--index I]``: the HTTP service.

A shortcut for ``serve run CONFIG``: it applies the overrides to a copy of the config,
checks that a non-loopback host has API keys, then *becomes* Ray Serve's own ``serve run``
(``exec``), so the service is exactly what ``serve run`` starts, and the engine never
imports the ``serve`` package. Relative paths in the config (the default index) are
resolved here, against the directory the command runs in.

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
import sys
from pathlib import Path

from flows.commands._support import CliError, require_extra
from operators.api_keys import KEYS_ENV, env_key_id, env_keys, key_hash

#: The config ``tessera serve`` starts when given none: ./serve/config.yaml, else the one beside the package.
PACKAGED_CONFIG = Path(__file__).resolve().parents[2] / "serve" / "config.yaml"
#: Settings the app and its replicas read, copied from this environment into ``runtime_env.env_vars`` when set
#: (``TESSERA_HOME`` and ``TESSERA_OUTBOUND`` always are). Paths among them are made absolute here.
CARRIED = ("TESSERA_ALLOW_HOSTS", "TESSERA_ALLOW_ENV", "TESSERA_MODELS", "TESSERA_LLM_THREADS",
           "TESSERA_PLACEMENT_TIMEOUT_S", "TESSERA_NODE_LOSS_GRACE_S")
CARRIED_PATHS = ("TESSERA_MODELS",)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("serve", parents=[common], help="start the HTTP service (Ray Serve)",
                            description="Start the Tessera service: the task, search, flow and model API on Ray "
                            "Serve, with OpenAPI docs at /docs. Same as `serve run serve/config.yaml`, with "
                            "overrides.")
    parser.add_argument("--config", type=Path, default=None,
                        help="Serve config (default: ./serve/config.yaml, else the packaged one)")
    parser.add_argument("--host", help="interface to listen on (default: the config's, 127.0.0.1); any other than "
                        "loopback needs API keys (args.service.api_keys or $TESSERA_API_KEYS)")
    parser.add_argument("--port", type=int, help="port (default: the config's, 8000)")
    parser.add_argument("--index", help="default index for flows whose retrieval steps name none")
    parser.add_argument("--address", help="Ray cluster to run on (default: as `serve run`; 'local' starts one)")
    parser.add_argument("--print-config", action="store_true", help="print the config it would run, and exit")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import yaml

    require_extra("serve", ("fastapi", "starlette"))
    source = args.config or (Path("serve/config.yaml") if Path("serve/config.yaml").is_file() else PACKAGED_CONFIG)
    if not source.is_file():
        raise CliError(f"no Serve config at {source}", field="config")
    config = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    apply_overrides(config, host=args.host, port=args.port, index=args.index)
    carry_environment(config, os.environ)
    check_keys(config)
    text = yaml.safe_dump(config, sort_keys=False)
    if args.print_config:
        print(text, end="")
        return 0
    # `serve run` reads a file, and this process becomes it (exec), so nothing is left to delete the file later:
    # one file per port under $TESSERA_HOME, rewritten by the next start, rather than one more in /tmp each time.
    from operators.home import tessera_home

    port = int((config.get("http_options") or {}).get("port", 8000))
    path = tessera_home() / "serve" / f"config-{port}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    command = [sys.executable, "-m", "ray.serve.scripts", "run", str(path)]
    if args.address:
        command += ["--address", args.address]
    # The service runs specs that come from the network: outbound URLs reach public addresses only
    # (operators/outbound.py's "server" policy); TESSERA_ALLOW_HOSTS names the exceptions.
    os.environ["TESSERA_OUTBOUND"] = "server"
    os.environ.pop(KEYS_ENV, None)  # hashed into the config: no raw key reaches a Ray process started from here
    secrets = [name.strip() for name in os.environ.get("TESSERA_ALLOW_ENV", "").split(",") if name.strip()]
    if args.address and args.address != "local" and secrets:
        print(f"tessera serve: not carried to the cluster (secrets): ${', $'.join(secrets)}; set them where its "
              "Ray nodes start", file=sys.stderr)
    print(f"tessera serve: once the app is up, the web UI is at {ui_address(config)}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)
    return 0  # not reached


def ui_address(config: dict) -> str:
    """Where a browser finds the web UI: the service application's route prefix on the HTTP address."""
    http = config.get("http_options") or {}
    host, port = str(http.get("host", "127.0.0.1")), int(http.get("port", 8000))
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    prefix = next((str(a.get("route_prefix") or "/") for a in config.get("applications") or []
                   if (a.get("args") or {}).get("service") is not None), "/")
    return f"http://{shown}:{port}{prefix.rstrip('/')}/ui/"


def apply_overrides(config: dict, *, host: str | None, port: int | None, index: str | None) -> None:
    from operators.store import resolve_index

    http = config.setdefault("http_options", {})
    if host:
        http["host"] = host
    if port:
        http["port"] = port
    for application in config.get("applications") or []:
        service = (application.setdefault("args", {}) or {}).get("service", {})
        if service is None:  # models only
            continue
        application["args"]["service"] = service
        value = index or service.get("default_index", ".tessera/indices/sample")
        if value:
            service["default_index"] = str(Path(resolve_index(value)).resolve())


def carry_environment(config: dict, environ) -> None:
    """Put what this environment configures into the config, so it holds wherever the app is built: the raw
    keys of ``$TESSERA_API_KEYS`` as hashes in each service's ``api_keys`` (ids ``env-<hash prefix>``, as
    ``serve.service_settings.resolve`` names them), and ``$TESSERA_HOME``, the outbound policy and ``CARRIED``
    in each application's ``runtime_env.env_vars`` (a value the config sets itself is kept)."""
    from operators.home import tessera_home

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
        if KEYS_ENV in runtime_env["env_vars"]:
            raise CliError(f"{KEYS_ENV} in runtime_env.env_vars would send raw keys to every replica: put their "
                           f"sha256 in args.service.api_keys (or set {KEYS_ENV} where tessera serve runs)",
                           field="runtime_env")
        service = (application.get("args") or {}).get("service")
        if service is None or not digests:
            continue
        keys = service["api_keys"] = list(service.get("api_keys") or [])
        known, ids = {k.get("sha256") for k in keys}, {k.get("id") for k in keys}
        for digest in digests:
            if digest not in known:
                key_id = env_key_id(digest, ids)
                keys.append({"id": key_id, "sha256": digest})
                ids.add(key_id)


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
