"""The Ray cluster a command joins (``RAY_ADDRESS``, ``tessera serve --address``), checked before Ray is started.

Ray refuses or waits on a wrong address in ways that reached users as Tessera's internal errors, some only after
minutes or after work was done (an ingestion had staged its corpus):

* the job server's ``http://HOST:8265`` (what ``ray job submit`` takes, and what cluster/README.md exports as
  ``RAY_ADDRESS``) is not a cluster address: ``ray.init`` raises a bare ``ValueError``;
* an address where nothing listens (a cluster that was stopped) made ``ray.init`` retry for minutes;
* a port where something else listens (a web server, a socket that accepts and says nothing) made ``ray.init``
  wait for minutes, its own GCS client warning every few seconds;
* a cluster with token authentication refuses a driver that does not send the token: ``ConnectionError`` after
  about 20 s of Ray's own warnings;
* Ray Client's ``ray://HOST:10001`` passed, then a batch command crashed after seconds with ``AttributeError:
  'Worker' object has no attribute 'core_worker'``: Ray Data, which the batch commands run on, does not work over
  Ray Client (ray-project/ray#42739, #48682). They refuse ``ray://`` before connecting; ``tessera serve`` (Serve
  only) still takes it.

So the address is asked, before ``ray.init``, the question Ray asks first, with Ray's own gRPC channel (its TLS
and token settings) and a deadline: the GCS's ``GetClusterId``, or Ray Client's ``PING`` for ``ray://``. Each
refusal is one ``RayAddressError`` here, naming the setting and what to give instead (docs/cluster.md).

Without an address (or with ``auto``) Ray joins the cluster the last ``ray start`` on this machine recorded
(``ray_current_cluster`` in Ray's temp folder, ``$RAY_TMPDIR/ray``, else ``$TMPDIR/ray``, else ``/tmp/ray``; not
the ``--temp-dir`` of a ``ray start``); that one is found with Ray's
own lookup and asked the same way. When there is none, nothing is asked: ``ray.init`` starts a local Ray.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from typing import Mapping

from operators.errors import TesseraError, see_docs

#: How long the probe waits for the address to accept a connection, and then for Ray's answer.
PROBE_SECONDS = 5.0
#: Values that start a local Ray or find one on this machine rather than name a cluster.
LOCAL = ("", "local", "auto")
#: Of those, the ones for which Ray looks for a cluster on this machine (``found_cluster``).
FOUND = ("", "auto")
DOCS = see_docs("cluster")


class RayAddressError(TesseraError):
    """The Ray cluster to join is named wrongly, does not answer, or refused this process."""


class RayStartError(TesseraError):
    """The local Ray this process starts did not come up (its raylet or GCS did not answer in time)."""


def start_timed_out(err: Exception) -> RayStartError | None:
    """``ray.init``'s bare ``Exception`` for a local Ray that did not start in time (a loaded machine), as one line
    with what to do; None for any other error."""
    said = str(err).strip()
    if "timed out during startup" not in said:
        return None
    return RayStartError(f"the local Ray did not start: {said.splitlines()[0]} On a busy machine, run the command "
                         "again; or start Ray once (ray start --head) and let every run join it (RAY_ADDRESS=auto)")


#: Addresses a command checked ahead of its run (``check_ray_address(ahead=True)``), so that the ``ray.init`` of
#: that run does not ask them again: one probe a run.
_checked_ahead: set[str] = set()


def given_address(address: str | None, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """``(address, setting)``: ``address`` itself when given (``--address``), else ``RAY_ADDRESS``."""
    if address:
        return address, "--address"
    return environ.get("RAY_ADDRESS", ""), "RAY_ADDRESS"


def check_ray_address(address: str | None = None, environ: Mapping[str, str] = os.environ, *,
                      job_hint: bool = True, ahead: bool = False, temp_dir: str | None = None) -> None:
    """Refuse an address Ray cannot join: the job server's HTTP address, a host and port where nothing listens or
    something other than Ray answers, a cluster that refuses this process's token. No address or ``auto``: the
    cluster Ray finds on this machine (``found_cluster``; ``temp_dir``: ``ray.init``'s ``_temp_dir``), if any, is
    checked the same way; ``local`` (a new local Ray) is not checked. ``job_hint``: a batch command, which runs Ray
    Data: a Ray Client address is refused (``ray_client_refused``), and a job server's address hints that the
    command can be submitted there instead (not ``tessera serve``). ``ahead``: a check before
    the run, whose ``ray.init`` (``ray_env.ensure_ray``) then takes the address as checked rather than probing it
    again."""
    value, setting = given_address(address, environ)
    named, field = f"{setting} {value!r}", setting.lstrip("-")
    local = _start_local(setting)
    written = value.strip().lower() if value.strip().lower() in LOCAL else value.strip()
    if written != value:  # Ray takes ' auto', 'Local' or a blank value as a host and fails to parse it
        fix = f"write {written!r}" if written else "leave it out" if setting == "--address" else local
        raise RayAddressError(f"{named}: Ray reads the address exactly as written, spaces and case too; {fix}",
                              field=field)
    if value in FOUND:
        found = found_cluster(value, setting, temp_dir)
        if found is None:
            return  # no cluster on this machine: ray.init starts a local Ray, unchecked (nothing to ask)
        field = field if value else None  # RAY_ADDRESS unset: no setting to name
        value, named = found
        local = "set RAY_ADDRESS=local" if setting == "RAY_ADDRESS" else "give --address local"
    elif value in LOCAL:
        return
    if not ahead and value in _checked_ahead:
        _checked_ahead.discard(value)
        return
    client_too = "" if job_hint else ", or ray://HOST:10001 (Ray Client)"  # Ray Data does not run over Ray Client
    if value.lower().startswith(("http://", "https://")):
        job = f"; or submit the command to it as a job with `ray job submit`: see {DOCS}" if job_hint else ""
        raise RayAddressError(
            f"{setting} {value!r} is the address of Ray's job server (the dashboard, which `ray job submit` takes): "
            f"a cluster is joined at its GCS address, HOST:6379 (what `ray start --address` takes){client_too}"
            f"{job}; or {local} to start a local Ray", field=field)
    host, port = _host_port(value)
    if host is None or not 0 < port < 65536:  # ray.init's bare ValueError, RuntimeError, or minutes of waiting
        raise RayAddressError(
            f"{named} is not an address Ray can join: give the head's GCS address, HOST:6379 (what `ray start "
            f"--address` takes){client_too}, or 'auto' for the cluster started on this machine; or {local} to "
            f"start a local Ray", field=field)
    client = value.lower().startswith("ray://")
    if client and job_hint:
        raise ray_client_refused(named, field)
    dialed = _as_ray_dials(host, value)
    try:
        with socket.create_connection((dialed, port), timeout=PROBE_SECONDS):
            pass
    except OSError as err:
        raise RayAddressError(
            f"{named}: nothing answers at {dialed}:{port} ({err.strerror or err}){_redialed(host, dialed, port)}: "
            f"the cluster is not running there, or the port is not the head's GCS port (6379 unless `ray start "
            f"--head --port` chose another); or {local} to start a local Ray", field=field) from None
    refusal = ray_refusal(dialed, port, client=client)
    if refusal is not None and refusal[0] == "UNAUTHENTICATED":  # before ray.init, whose GCS client warns 20 s
        raise joining_failed(ConnectionError(f"the cluster refused this process ({refusal[1]})"), address, environ,
                             named=named, field=field)
    if refusal is not None:
        raise RayAddressError(f"{named}: {_not_ray(refusal, f'{dialed}:{port}', client, job_hint)}; give the "
                              f"head's GCS address, HOST:6379 (the port `ray start --head --port` chose)"
                              f"{client_too}; or {local} to start a local Ray", field=field)
    if ahead:
        _checked_ahead.add(value)


def _redialed(host: str, dialed: str, port: int) -> str:
    """Why the address dialled is not the one written: Ray dials a loopback host as this machine's address. Where
    something answers at the written one (a dashboard bound to 127.0.0.1 alone), that is no Ray GCS, which listens
    on the machine's address too."""
    if dialed == host:
        return ""
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            answers = True
    except OSError:
        answers = False
    there = (f"; something answers at {host}:{port} itself, which Ray does not dial: a service bound to {host} "
             f"alone, such as the dashboard (the job server: http://{host}:{port} to `ray job submit`), not a GCS"
             if answers else "")
    return f" (Ray dials {host} as this machine's address, {dialed}{there})"


def ray_client_refused(where: str, field: str | None = None) -> RayAddressError:
    """A batch command's refusal of Ray Client (``where``: the address in words, or this process's connection):
    Ray Data cannot run over it, and its first ``materialize`` crashed with an ``AttributeError``."""
    return RayAddressError(
        f"{where}: Ray Data, which `--executor ray` and ingestion run on, does not work over Ray Client (ray://): "
        f"submit the command to the cluster as a job with `ray job submit`, or give the head's GCS address, "
        f"HOST:6379 (what `ray start --address` takes); see {DOCS}", field=field)


def joining_failed(err: Exception, address: str | None = None, environ: Mapping[str, str] = os.environ, *,
                   named: str | None = None, field: str | None = None) -> RayAddressError:
    """``ray.init``'s ``ConnectionError`` as one line: most often a cluster with token authentication that this
    process sent no token to (Ray sends it only with ``RAY_AUTH_MODE=token``). ``named``, ``field``: the cluster
    and setting in words, when the check found them (``found_cluster``)."""
    value, setting = given_address(address, environ)
    where = named or (f"{setting} {value!r}" if value else "the local Ray cluster")
    hint = ("if the cluster has token authentication on (Ray 2.60's default when a token exists), set "
            "RAY_AUTH_MODE=token, and RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH when the token is not in "
            f"~/.ray/auth_token; see {see_docs('cluster', 'Token authentication')}")
    if environ.get("RAY_AUTH_MODE", "").strip().lower() == "token":
        hint = "the token sent (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) may not be the cluster's"
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if named is None:
        field = setting.lstrip("-") if value else None
    return RayAddressError(f"cannot join {where}: {first}; {hint}", field=field)


def found_cluster(value: str, setting: str, temp_dir: str | None = None) -> tuple[str, str] | None:
    """``(address, the cluster in words)`` of the cluster ``ray.init`` joins for ``value`` ``''`` or ``'auto'``:
    the one the last ``ray start`` here recorded (``ray_current_cluster`` in Ray's temp folder), for ``auto`` else
    any running on this machine; Ray's own lookup. None: none recorded, and ``ray.init`` starts a local Ray.
    ``auto`` with no cluster at all is refused, as ``ray.init`` would refuse it."""
    from ray._common.utils import get_ray_address_file
    from ray._private.services import find_bootstrap_address, get_ray_address_from_environment

    try:
        with _quiet("ray._private.services"):  # its "Found multiple active Ray instances": ray.init says it again
            found = get_ray_address_from_environment(value or None, temp_dir)
    except ConnectionError as err:  # auto, and no cluster runs here
        raise RayAddressError(f"{setting} 'auto': no Ray cluster runs on this machine ({str(err).split('. ')[0]}); "
                              f"give the cluster's address, or {_start_local(setting)} to start a local Ray",
                              field=setting.lstrip("-")) from None
    if not found or found.lower() in LOCAL:
        return None
    recorded = found == find_bootstrap_address(temp_dir)
    where = f"found in {get_ray_address_file(temp_dir)}" if recorded else "running on this machine"
    given = f"{setting} 'auto'" if value else f"{setting} unset"
    return found, f"the Ray cluster at {found} ({given}: {where})"


def ray_refusal(host: str, port: int, *, client: bool = False) -> tuple[str, str] | None:
    """None when ``host:port`` answers as Ray does: a GCS its cluster id (what ``ray.init`` asks first), Ray Client
    (``client``) its ``PING``. Else ``(gRPC status name, detail)``: ``UNAUTHENTICATED`` from a cluster that refused
    this process's token, or for a token Ray finds nowhere to send; any other status, something that is not that
    part of Ray (``DEADLINE_EXCEEDED``: no answer in ``PROBE_SECONDS``). Ray's own channel: its TLS and token."""
    import grpc
    from ray._common.network_utils import build_address
    from ray._private.gcs_utils import create_gcs_channel
    from ray.exceptions import AuthenticationError

    try:
        with create_gcs_channel(build_address(host, port)) as channel:
            if client:
                from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

                ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(
                    ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING), timeout=PROBE_SECONDS)
            else:
                from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

                gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(
                    gcs_service_pb2.GetClusterIdRequest(), timeout=PROBE_SECONDS)
    except grpc.RpcError as err:
        lines = (err.details() or "").strip().splitlines()
        return err.code().name, lines[0] if lines else err.code().name
    except AuthenticationError as err:  # RAY_AUTH_MODE=token and no token at hand: Ray's own sentence
        return "UNAUTHENTICATED", str(err).split(". ")[0]
    return None


@contextlib.contextmanager
def _quiet(logger_name: str):
    """Warnings of ``logger_name`` left unsaid for the block: the probe asks what ``ray.init`` asks again, and a
    refused run should end in Tessera's one line, not Ray's warning beside it."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _start_local(setting: str) -> str:
    """How to start a local Ray instead, with the setting that named the address (``RAY_ADDRESS`` or
    ``--address``)."""
    return "unset RAY_ADDRESS" if setting == "RAY_ADDRESS" else "give --address local"


def _not_ray(refusal: tuple[str, str], at: str, client: bool, job_hint: bool = False) -> str:
    """What answered at ``at`` in place of Ray (``ray_refusal``'s status and detail), in words; ``job_hint``: a batch
    command's, which cannot take a Ray Client port (``check_ray_address``)."""
    status, detail = refusal
    want = "Ray Client server" if client else "Ray cluster's GCS"
    if status == "DEADLINE_EXCEEDED":
        return (f"{at} accepts connections but does not answer as a {want} (no reply in {PROBE_SECONDS:g} s): "
                "another program listens there")
    if status == "UNIMPLEMENTED":
        other = (f"if it is the head's GCS port, write it without ray:// ({at})" if client else
                 "if it is Ray Client's port (10001 unless `--ray-client-server-port` chose another), "
                 + ("Ray Data does not work over Ray Client: submit the command as a job (`ray job submit`)"
                    if job_hint else "write ray://HOST:PORT"))
        return f"{at} answers gRPC but is not a {want}: {other}"
    if "HTTP/2" in detail or "http1" in detail:
        return f"{at} answers HTTP/1, as a web server does, not Ray's gRPC: it is not a {want}"
    if len(detail) > 160:
        detail = detail[:157] + "..."
    return f"what listens at {at} is not a {want} ({detail})"


def _as_ray_dials(host: str, value: str) -> str:
    """The host Ray connects to: for a GCS address, loopback is replaced by this node's IP (so the dashboard's
    127.0.0.1 port given as a GCS address is not reached)."""
    if value.lower().startswith("ray://"):
        return host
    from ray._private.services import resolve_ip_for_localhost

    return resolve_ip_for_localhost(host)


def _host_port(value: str) -> tuple[str | None, int]:
    """``HOST:PORT`` (or ``ray://HOST:PORT``, ``[v6]:PORT``) split; ``(None, 0)`` for anything else: no port, a
    scheme other than ``ray://``, a path, a space or a bare IPv6 address."""
    rest = value.split("://", 1)[1] if value.startswith("ray://") else value  # RAY://: Ray imports a module RAY
    if "://" in rest or "/" in rest or any(ch.isspace() for ch in rest):
        return None, 0
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not host.strip("[]"):
        return None, 0
    if ":" in host and not (host.startswith("[") and host.endswith("]")):  # ::1:6379: which colon ends the host?
        return None, 0
    return host.strip("[]"), int(port)
