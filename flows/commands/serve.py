"""``tessera serve [--config serve/config.yaml] [--host H] [--port P] [--index I]``: the HTTP service.

A shortcut for ``serve run CONFIG``: it applies the overrides to a copy of the config,
checks that a non-loopback host has API keys, then *becomes* Ray Serve's own ``serve run``
(``exec``), so the service is exactly what ``serve run`` starts, and the engine never
imports the ``serve`` package. Relative paths in the config (the default index) are
resolved here, against the directory the command runs in.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path

from flows.commands._support import CliError, require_extra

#: The config ``tessera serve`` starts when given none: ./serve/config.yaml, else the one beside the package.
PACKAGED_CONFIG = Path(__file__).resolve().parents[2] / "serve" / "config.yaml"
KEYS_ENV = "TESSERA_API_KEYS"


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


def check_keys(config: dict) -> None:
    """Refuse a non-loopback host when no application has API keys (the service would be open to anyone)."""
    host = str((config.get("http_options") or {}).get("host", "127.0.0.1"))
    if _loopback(host) or os.environ.get(KEYS_ENV, "").strip():
        return
    for application in config.get("applications") or []:
        service = (application.get("args") or {}).get("service") or {}
        if not service.get("api_keys") and not service.get("allow_public_without_keys"):
            raise CliError(f"refusing to listen on {host} without API keys: set args.service.api_keys (hashed) in "
                           f"the config or {KEYS_ENV}, or listen on 127.0.0.1", field="host")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
