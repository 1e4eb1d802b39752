"""The Ray cluster a command joins (``RAY_ADDRESS``, ``tessera serve --address``), checked before Ray is started.

Ray refuses or waits on a wrong address in ways that reached users as Tessera's internal errors, some only after
minutes or after work was done (an ingestion had staged its corpus):

* the job server's ``http://HOST:8265`` (what ``ray job submit`` takes, and what cluster/README.md exports as
  ``RAY_ADDRESS``) is not a cluster address: ``ray.init`` raises a bare ``ValueError``;
* an address where nothing listens (a cluster that was stopped) made ``ray.init`` retry for minutes;
* a cluster with token authentication refuses a driver that does not send the token: ``ConnectionError`` after
  about 20 s of Ray's own warnings.

Each is one ``RayAddressError`` here, naming the setting and what to give instead (docs/cluster.md).
"""

from __future__ import annotations

import os
import socket
from typing import Mapping

from operators.errors import TesseraError

#: How long the probe waits for the address to accept a connection.
PROBE_SECONDS = 5.0
#: Values that start a local Ray or find one on this machine rather than name a cluster.
LOCAL = ("", "local", "auto")
DOCS = "docs/cluster.md"


class RayAddressError(TesseraError):
    """The Ray cluster to join is named wrongly, does not answer, or refused this process."""


def given_address(address: str | None, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """``(address, setting)``: ``address`` itself when given (``--address``), else ``RAY_ADDRESS``."""
    if address:
        return address, "--address"
    return environ.get("RAY_ADDRESS", ""), "RAY_ADDRESS"


def check_ray_address(address: str | None = None, environ: Mapping[str, str] = os.environ, *,
                      job_hint: bool = True) -> None:
    """Refuse an address Ray cannot join: the job server's HTTP address, or a host and port where nothing listens.
    Nothing to check for a local Ray (no address, ``local``, ``auto``). ``job_hint``: say that a command can be
    submitted to that job server instead (the batch commands; not ``tessera serve``)."""
    value, setting = given_address(address, environ)
    value = value.strip()
    if value.lower() in LOCAL:
        return
    local = "unset RAY_ADDRESS" if setting == "RAY_ADDRESS" else "give --address local"
    if value.lower().startswith(("http://", "https://")):
        job = f"; or submit the command to it as a job (`ray job submit`, {DOCS})" if job_hint else ""
        raise RayAddressError(
            f"{setting} {value!r} is the address of Ray's job server (the dashboard, which `ray job submit` takes): "
            f"a cluster is joined at its GCS address, HOST:6379 (what `ray start --address` takes), or at "
            f"ray://HOST:10001{job}; or {local} to start a local Ray", field=setting.lstrip("-"))
    host, port = _host_port(value)
    if host is None:
        return  # a form Ray reads its own way: its own error, if any
    dialed = _as_ray_dials(host, value)
    try:
        with socket.create_connection((dialed, port), timeout=PROBE_SECONDS):
            pass
    except OSError as err:
        raise RayAddressError(
            f"{setting} {value!r}: nothing answers at {dialed}:{port} ({err.strerror or err}): the cluster is not "
            f"running there, or the port is not the head's GCS port (6379 unless `ray start --head --port` chose "
            f"another); or {local} to start a local Ray", field=setting.lstrip("-")) from None


def joining_failed(err: Exception, address: str | None = None,
                   environ: Mapping[str, str] = os.environ) -> RayAddressError:
    """``ray.init``'s ``ConnectionError`` as one line: most often a cluster with token authentication that this
    process sent no token to (Ray sends it only with ``RAY_AUTH_MODE=token``)."""
    value, setting = given_address(address, environ)
    where = f"{setting} {value!r}" if value else "the local Ray cluster"
    hint = ("if the cluster has token authentication on (Ray 2.60's default when a token exists), set "
            "RAY_AUTH_MODE=token, and RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH when the token is not in "
            f"~/.ray/auth_token ({DOCS}#token-authentication)")
    if environ.get("RAY_AUTH_MODE", "").strip().lower() == "token":
        hint = "the token sent (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) may not be the cluster's"
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return RayAddressError(f"cannot join {where}: {first}; {hint}", field=setting.lstrip("-") if value else None)


def token_not_sent(address: str | None = None, environ: Mapping[str, str] = os.environ) -> str | None:
    """A note when a cluster is joined with a Ray token at hand that Ray will not send (``RAY_AUTH_MODE`` is not
    ``token``): a cluster with token authentication on refuses the process after about 20 s (``tessera serve``:
    Ray's traceback from ``serve run``). None when nothing is joined, or the token is sent or absent."""
    value, setting = given_address(address, environ)
    if value.strip().lower() in LOCAL or environ.get("RAY_AUTH_MODE", "").strip():
        return None
    path = environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    if not environ.get("RAY_AUTH_TOKEN") and not os.path.isfile(path):
        return None
    return (f"a Ray token exists but RAY_AUTH_MODE is not set, so it is not sent to the cluster at {setting} "
            f"{value.strip()!r}: if that cluster has token authentication on, it refuses this one; export "
            f"RAY_AUTH_MODE=token ({DOCS}#token-authentication)")


def _as_ray_dials(host: str, value: str) -> str:
    """The host Ray connects to: for a GCS address, loopback is replaced by this node's IP (so the dashboard's
    127.0.0.1 port given as a GCS address is not reached)."""
    if value.lower().startswith("ray://"):
        return host
    from ray._private.services import resolve_ip_for_localhost

    return resolve_ip_for_localhost(host)


def _host_port(value: str) -> tuple[str | None, int]:
    """``HOST:PORT`` (or ``ray://HOST:PORT``, ``[v6]:PORT``) split; ``(None, 0)`` for anything else."""
    rest = value.split("://", 1)[1] if value.lower().startswith("ray://") else value
    if "://" in rest or "/" in rest:
        return None, 0
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None, 0
    return host.strip("[]"), int(port)
