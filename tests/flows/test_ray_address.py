"""The cluster a command joins, checked before anything runs (flows/executors/ray_address.py): the job server's
``http://`` address (what cluster/README.md exports as ``RAY_ADDRESS`` for ``ray job submit``), an address where
nothing listens, and a port where something other than Ray listens (a web server, a socket that accepts and says
nothing, a gRPC server that is not Ray) are one line naming the setting, exit status 2. Ray itself raised a
``ValueError`` (an internal error, after an ingestion had staged its corpus) or retried for minutes. No Ray starts
here: where a check must pass, a gRPC server on this machine answers ``GetClusterId`` as a Ray GCS does, with Ray's
own generated service (tests/flows/test_jobs_worker_node.py joins a real cluster)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE_BUDGET = 5.0  # seconds: a refused connection is known at once, far within the probe's deadline


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gcs(gcs_stand_in) -> Iterator[SimpleNamespace]:
    with gcs_stand_in() as server:
        yield server


@pytest.fixture
def web_server(ray_dials) -> Iterator[str]:
    """An HTTP/1 server (what a mistyped port often reaches): ``127.0.0.1:PORT``."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((ray_dials, 0), Quiet)
    # polled every 0.05 s for the shutdown below (the default half a second was each test's teardown)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tessera(monkeypatch, capsys, tmp_path):
    """``tessera ARGS`` in this process with ``RAY_ADDRESS`` set as given: the exit status and stderr's lines."""
    from flows.commands import main

    def run(ray_address: str, *args: str) -> tuple[int, list[str]]:
        monkeypatch.chdir(REPO)
        monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("RAY_ADDRESS", ray_address)
        monkeypatch.delenv("TESSERA_DEBUG", raising=False)
        capsys.readouterr()
        status = main(list(args))
        return status, capsys.readouterr().err.strip().splitlines()

    return run


@pytest.mark.timeout(60)
def test_the_job_servers_address_is_refused_by_run_and_ingest_before_anything_runs(tessera, tmp_path):
    address = f"http://127.0.0.1:{free_port()}"
    status, err = tessera(address, "run", "bm25", "--executor", "ray", "--index", str(tmp_path / "idx"),
                          "--queries", "honey bees")
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith("tessera: error: field 'RAY_ADDRESS': RAY_ADDRESS 'http://127.0.0.1:")
    assert "Ray's job server" in err[0] and "HOST:6379" in err[0] and "ray job submit" in err[0]

    index = tmp_path / "ingested"
    status, err = tessera(address, "ingest", "--executor", "ray", "--source", "data/sample/corpus.jsonl",
                          "--index", str(index))
    assert status == 2 and len(err) == 1 and "Ray's job server" in err[0], err
    assert not index.exists()  # nothing staged


@pytest.mark.timeout(60)
def test_an_address_where_nothing_listens_is_one_line_not_minutes_of_retries(tessera, tmp_path):
    port = free_port()
    status, err = tessera(f"127.0.0.1:{port}", "run", "bm25", "--executor", "ray", "--index",
                          str(tmp_path / "idx"), "--queries", "honey bees")
    assert status == 2 and len(err) == 1, err
    assert f"RAY_ADDRESS '127.0.0.1:{port}': nothing answers at " in err[0] and "unset RAY_ADDRESS" in err[0]


def test_the_local_executor_and_a_local_address_are_not_checked(tmp_path, monkeypatch):
    from flows.executors.ray_address import check_ray_address

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # Ray's lookup finds no cluster recorded there
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for value in ("", "local"):
        check_ray_address(environ={"RAY_ADDRESS": value})
    check_ray_address("local", environ={"RAY_ADDRESS": "http://127.0.0.1:1"})  # --address wins


def recorded(tmp_path: Path, address: str, monkeypatch) -> Path:
    """``address`` recorded as the last ``ray start`` of this machine does, in a Ray temp folder of the test's own
    (``RAY_TMPDIR``), not /tmp/ray; the file."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "ray").mkdir(exist_ok=True)
    (record := tmp_path / "ray" / "ray_current_cluster").write_text(address)
    return record


def test_the_cluster_ray_finds_without_an_address_is_asked_first(gcs_stand_in, tmp_path, monkeypatch):
    """No ``RAY_ADDRESS`` (or ``auto``): Ray joins the cluster ``ray start`` recorded on this machine, and a token
    cluster's refusal there came after Ray's 20 s of warnings; the check finds it with Ray's lookup and asks it
    first: one line naming the cluster and where it was found. One that answers is asked once and passes."""
    from ray._private.services import find_gcs_addresses

    from flows.executors.ray_address import RayAddressError, check_ray_address

    # With 'auto', Ray's lookup takes a cluster running on this machine over the recorded one when exactly one runs
    # (its legacy rule), so 'auto' is asked only where no other Ray runs; unset always takes the record.
    values = ("", "auto") if not find_gcs_addresses() else ("",)
    with gcs_stand_in(refuse=True) as cluster:
        record = recorded(tmp_path, cluster.address, monkeypatch)
        for value in values:
            with pytest.raises(RayAddressError) as refused:
                check_ray_address(environ={"RAY_ADDRESS": value})
            given = "RAY_ADDRESS 'auto'" if value else "RAY_ADDRESS unset"
            assert refused.value.message.startswith(
                f"cannot join the Ray cluster at {cluster.address} ({given}: found in {record}): the cluster refused "
                "this process (InvalidAuthToken: Authentication token is missing or incorrect); if the cluster has "
                "token authentication on"), refused.value
            assert refused.value.field == ("RAY_ADDRESS" if value else None)
        assert cluster.asked == len(values)
    with gcs_stand_in() as cluster:
        recorded(tmp_path, cluster.address, monkeypatch)
        check_ray_address(environ={})
        assert cluster.asked == 1
        check_ray_address("local", environ={})  # a new local Ray: nothing to ask
        assert cluster.asked == 1


def test_a_recorded_cluster_that_was_stopped_is_refused_at_once(tmp_path, monkeypatch):
    """A head stopped without ``ray stop`` leaves its address recorded; ``ray.init`` then waited on it, warning
    every 5 s. Refused at once, with the way to a local Ray."""
    from flows.executors.ray_address import RayAddressError, check_ray_address

    port = free_port()
    record = recorded(tmp_path, f"127.0.0.1:{port}", monkeypatch)
    started = time.monotonic()
    with pytest.raises(RayAddressError, match=rf"^the Ray cluster at 127.0.0.1:{port} \(RAY_ADDRESS unset: found in "
                                              rf"{record}\): nothing answers at .*set RAY_ADDRESS=local to start a "
                                              "local Ray$"):
        check_ray_address(environ={})
    assert time.monotonic() - started < PROBE_BUDGET


@pytest.mark.timeout(60)
def test_tessera_serve_refuses_an_address_ray_cannot_join(tessera, tmp_path):
    port = str(free_port())
    status, err = tessera("", "serve", "--port", port, "--address", f"http://127.0.0.1:{free_port()}")
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith("tessera: error: field '--address': --address 'http://127.0.0.1:")
    assert "give --address local" in err[0] and "ray job submit` takes" in err[0] and "as a job" not in err[0]
    status, err = tessera(f"127.0.0.1:{free_port()}", "serve", "--port", port)
    assert status == 2 and len(err) == 1 and "field 'RAY_ADDRESS'" in err[0] and "nothing answers" in err[0], err


@pytest.mark.usefixtures("app_args_in_process")
def test_tessera_serve_onto_a_cluster_that_refuses_its_token_stops_before_serve_run(tessera, gcs_stand_in,
                                                                                   monkeypatch, tmp_path):
    """A cluster with token authentication refuses ``serve run`` without ``RAY_AUTH_MODE=token`` (Ray's traceback,
    after about 20 s): the check asks first and gets the refusal (the reply a real GCS gives, InvalidAuthToken),
    one line; a cluster that answers lets ``serve run`` start, with no note about the token."""
    import flows.commands.serve as serve_command

    started = []
    monkeypatch.setattr(serve_command, "run_serve", lambda argv, env, **_: started.append(argv) or 0)
    token = tmp_path / "token"
    token.write_text("0" * 64)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with gcs_stand_in(refuse=True) as cluster:
        status, err = tessera("", "serve", "--port", str(free_port()), "--address", cluster.address)
    assert status == 2 and len(err) == 1 and not started, err
    assert err[0].startswith(f"tessera: error: field '--address': cannot join --address '{cluster.address}': the "
                             "cluster refused this process (InvalidAuthToken: Authentication token is missing or "
                             "incorrect); if the cluster has token authentication on")
    assert "set RAY_AUTH_MODE=token" in err[0]
    with gcs_stand_in() as cluster:
        status, err = tessera("", "serve", "--port", str(free_port()), "--address", cluster.address)
    assert status == 0 and started and not [line for line in err if "RAY_AUTH_MODE" in line], err


@pytest.mark.timeout(60)
@pytest.mark.timeout(60)
def test_a_server_on_loopback_alone_is_named_beside_the_address_ray_dials(tessera, tmp_path, ray_dials):
    """The dashboard bound to 127.0.0.1 given as RAY_ADDRESS: Ray dials loopback as this machine's address, where
    nothing listens, and the message named only that address, not the one typed, which answers."""
    if ray_dials.startswith("127."):
        pytest.skip("this machine's address is a loopback one: Ray dials what was typed")
    with socket.create_server(("127.0.0.1", 0)) as dashboard:
        port = dashboard.getsockname()[1]
        status, err = tessera(f"127.0.0.1:{port}", "run", "bm25", "--executor", "ray", "--index",
                              str(tmp_path / "idx"), "--queries", "honey bees")
    assert status == 2 and len(err) == 1, err
    assert f"nothing answers at {ray_dials}:{port} (" in err[0], err[0]
    assert f"(Ray dials 127.0.0.1 as this machine's address, {ray_dials}; something answers at 127.0.0.1:{port} " \
           f"itself, which Ray does not dial" in err[0] and f"http://127.0.0.1:{port} to `ray job submit`" in err[0]


def test_a_web_server_at_the_address_is_refused_at_once(tessera, tmp_path, web_server, ray_dials):
    started = time.monotonic()
    status, err = tessera(web_server, "run", "bm25", "--executor", "ray", "--index", str(tmp_path / "idx"),
                          "--queries", "honey bees")
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith(f"tessera: error: field 'RAY_ADDRESS': RAY_ADDRESS '{web_server}': ")
    assert "answers HTTP/1, as a web server does, not Ray's gRPC: it is not a Ray cluster's GCS" in err[0]
    assert "unset RAY_ADDRESS" in err[0] and time.monotonic() - started < 10
    client = f"ray://{ray_dials}:{web_server.rpartition(':')[2]}"  # Ray Client dials the host as given
    status, err = tessera("", "serve", "--port", str(free_port()), "--address", client)
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith(f"tessera: error: field '--address': --address '{client}': ")
    assert "it is not a Ray Client server" in err[0] and "give --address local" in err[0]


@pytest.mark.slow  # the probe waits PROBE_SECONDS for an answer that never comes
@pytest.mark.timeout(60)
def test_a_port_that_accepts_and_says_nothing_is_refused_in_seconds(tessera, tmp_path, ray_dials):
    with socket.create_server((ray_dials, 0)) as silent:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        status, err = tessera(address, "ingest", "--executor", "ray", "--source", "data/sample/corpus.jsonl",
                              "--index", str(tmp_path / "ingested"))
        took = time.monotonic() - started
    assert status == 2 and len(err) == 1, err
    assert f"RAY_ADDRESS '{address}': " in err[0] and "accepts connections but does not answer as a Ray " in err[0]
    assert took < 15 and not (tmp_path / "ingested").exists()


def test_a_grpc_server_that_is_not_ray_is_refused_with_the_ray_client_hint(gcs_stand_in, ray_dials):
    """``tessera serve`` (``job_hint=False``) may take Ray Client's port; a batch command may not (Ray Data)."""
    from flows.executors.ray_address import RayAddressError, check_ray_address

    with gcs_stand_in(gcs=False) as other:
        with pytest.raises(RayAddressError, match=r"answers gRPC but is not a Ray cluster's GCS: if it is Ray "
                                                  r"Client's port .* write ray://HOST:PORT"):
            check_ray_address(other.address, job_hint=False)
        with pytest.raises(RayAddressError, match=r"answers gRPC but is not a Ray cluster's GCS: if it is Ray "
                                                  r"Client's port .*, Ray Data does not work over Ray Client: submit "
                                                  r"the command as a job \(`ray job submit`\)") as err:
            check_ray_address(environ={"RAY_ADDRESS": other.address})
        assert "ray://" not in err.value.message
        with pytest.raises(RayAddressError, match=r"not a Ray Client server: if it is the head's GCS port, write it "
                                                  r"without ray:// \([^)]+:\d+\)"):
            check_ray_address(f"ray://{ray_dials}:{other.port}", job_hint=False)


@pytest.mark.timeout(60)
def test_ray_client_is_refused_by_run_and_ingest_before_connecting(tessera, tmp_path):
    """Ray Data does not work over Ray Client (ray-project/ray#42739): ``ray://`` passed the check, then a run
    crashed after 9 s with ``AttributeError: 'Worker' object has no attribute 'core_worker'``. Nothing listens at
    the address here, so the refusal is made before connecting; ``tessera serve`` (Serve alone) still asks it."""
    from flows.executors.ray_address import RayAddressError, check_ray_address

    address = f"ray://127.0.0.1:{free_port()}"
    status, err = tessera(address, "run", "bm25", "--executor", "ray", "--index", str(tmp_path / "idx"),
                          "--queries", "honey bees")
    assert status == 2 and err == [
        f"tessera: error: field 'RAY_ADDRESS': RAY_ADDRESS '{address}': Ray Data, which `--executor ray` and "
        "ingestion run on, does not work over Ray Client (ray://): submit the command to the cluster as a job with "
        "`ray job submit`, or give the head's GCS address, HOST:6379 (what `ray start --address` takes); see "
        "docs/cluster.md (`tessera docs cluster`)"], err
    index = tmp_path / "ingested"
    status, err = tessera(address, "ingest", "--executor", "ray", "--source", "data/sample/corpus.jsonl",
                          "--index", str(index))
    assert status == 2 and len(err) == 1 and "does not work over Ray Client" in err[0], err
    assert not index.exists()  # nothing staged
    with pytest.raises(RayAddressError, match="nothing answers at 127.0.0.1:"):
        check_ray_address(address, job_hint=False)


def test_a_command_asks_the_cluster_once_before_its_run(gcs, monkeypatch):
    """``check_job_paths`` checks the address before a run; the run's ``ray.init`` (``ensure_ray``, which calls
    ``check_ray_address``) takes it as checked. A later join asks again."""
    from flows.commands.job_paths import check_job_paths
    from flows.executors.ray_address import check_ray_address

    monkeypatch.setenv("RAY_ADDRESS", gcs.address)
    check_job_paths(executor="ray")
    assert gcs.asked == 1
    check_ray_address()  # the run's join
    assert gcs.asked == 1
    check_ray_address()  # another join in the same process (after ray.shutdown)
    assert gcs.asked == 2
