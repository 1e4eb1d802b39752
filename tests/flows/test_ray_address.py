"""The cluster a command joins, checked before anything runs (flows/executors/ray_address.py): the job server's
``http://`` address (what cluster/README.md exports as ``RAY_ADDRESS`` for ``ray job submit``) and an address where
nothing listens are one line naming the setting, exit status 2. Ray itself raised a ``ValueError`` (an internal
error, after an ingestion had staged its corpus) or retried for minutes. No Ray starts here."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def test_the_local_executor_and_a_local_address_are_not_checked(tmp_path):
    from flows.executors.ray_address import check_ray_address

    for value in ("", "local", "auto"):
        check_ray_address(environ={"RAY_ADDRESS": value})
    check_ray_address("local", environ={"RAY_ADDRESS": "http://127.0.0.1:1"})  # --address wins


@pytest.mark.timeout(60)
def test_tessera_serve_refuses_an_address_ray_cannot_join(tessera, tmp_path):
    port = str(free_port())
    status, err = tessera("", "serve", "--port", port, "--address", f"http://127.0.0.1:{free_port()}")
    assert status == 2 and len(err) == 1, err
    assert err[0].startswith("tessera: error: field 'address': --address 'http://127.0.0.1:")
    assert "give --address local" in err[0] and "ray job submit` takes" in err[0] and "as a job" not in err[0]
    status, err = tessera(f"127.0.0.1:{free_port()}", "serve", "--port", port)
    assert status == 2 and len(err) == 1 and "field 'RAY_ADDRESS'" in err[0] and "nothing answers" in err[0], err


@pytest.mark.usefixtures("app_args_in_process")
def test_tessera_serve_onto_a_cluster_says_when_its_ray_token_would_not_be_sent(tessera, monkeypatch, tmp_path):
    """A cluster with token authentication refuses ``serve run`` without ``RAY_AUTH_MODE=token`` (Ray's traceback,
    after about 20 s): the note comes before it starts."""
    import flows.commands.serve as serve_command

    started = []
    monkeypatch.setattr(serve_command, "run_serve", lambda argv, env: started.append(argv) or 0)
    token = tmp_path / "token"
    token.write_text("0" * 64)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with socket.create_server(("", 0)) as cluster:  # something answers at the address
        address = f"127.0.0.1:{cluster.getsockname()[1]}"
        status, err = tessera("", "serve", "--port", str(free_port()), "--address", address)
        assert status == 0 and started, err
        note = [line for line in err if "RAY_AUTH_MODE" in line]
        assert note == [f"tessera serve: a Ray token exists but RAY_AUTH_MODE is not set, so it is not sent to the "
                        f"cluster at --address '{address}': if that cluster has token authentication on, it refuses "
                        "this one; export RAY_AUTH_MODE=token (docs/cluster.md#token-authentication)"]
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        status, err = tessera("", "serve", "--port", str(free_port()), "--address", address)
        assert status == 0 and not [line for line in err if "RAY_AUTH_MODE" in line], err
