"""A task store that cannot be opened fails the app's build, with one line naming the setting and the problem, so a
plain ``serve run serve/config.yaml`` (without ``tessera serve``'s start checks) ends with the application
DEPLOY_FAILED after Serve's few tries of the build, no ingress replica started. The builder's own code on real
SQLite paths and a real refused PostgreSQL connection; then Serve's ``serve run`` itself, on its own Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from serve.app import ServeConfigError, build_app
from tests.serve.conftest import free_port


def refused(service: dict, tmp_path: Path, monkeypatch) -> ServeConfigError:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    with pytest.raises(ServeConfigError) as err:
        build_app({"models": [], "service": {"default_index": None, **service}})
    assert "\n" not in str(err.value), err.value
    return err.value


def test_a_store_under_a_plain_file_fails_the_build_naming_the_setting(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    err = refused({"task_store": f"sqlite:///{tmp_path / 'afile' / 'tasks.db'}"}, tmp_path, monkeypatch)
    assert err.field == "args.service.task_store"
    assert str(err).startswith(f"field 'args.service.task_store': the task store sqlite:///{tmp_path / 'afile'}")
    assert "cannot be opened (FileExistsError" in str(err) and str(err).endswith("fix it and deploy again")


def test_a_file_that_is_no_database_fails_the_build(tmp_path, monkeypatch):
    (tmp_path / "tasks.db").write_bytes(b"not a database, " * 64)
    err = refused({"task_store": f"sqlite:///{tmp_path / 'tasks.db'}"}, tmp_path, monkeypatch)
    assert err.field == "args.service.task_store" and "file is not a database" in err.message
    assert (tmp_path / "tasks.db").read_bytes() == b"not a database, " * 64  # left as it was


def test_a_postgresql_server_that_refuses_fails_the_build_without_showing_the_password(tmp_path, monkeypatch):
    url = f"postgresql+psycopg://tessera:s3cret@127.0.0.1:{free_port()}/tasks"  # nothing listens there
    err = refused({"task_store": url}, tmp_path, monkeypatch)
    assert err.field == "args.service.task_store" and "OperationalError" in err.message
    assert "s3cret" not in str(err) and "tessera:***@127.0.0.1" in str(err)


def test_the_default_store_under_an_unusable_tessera_home_names_tessera_home(tmp_path, monkeypatch):
    (tmp_path / "home").write_text("a file where TESSERA_HOME should be a folder")
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    with pytest.raises(ServeConfigError) as err:
        build_app({"models": [], "service": {"default_index": None}})
    assert err.value.field == "TESSERA_HOME" and "(the default store, under TESSERA_HOME)" in err.value.message


def test_a_store_that_opens_builds_the_app(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    assert build_app({"models": [], "service": {"default_index": None,
                                                "task_store": f"sqlite:///{tmp_path / 'db' / 'tasks.db'}"}})
    assert (tmp_path / "db" / "tasks.db").is_file()


@pytest.mark.ray
@pytest.mark.slow
def test_a_plain_serve_run_with_a_bad_store_ends_deploy_failed_without_starting_a_replica(tmp_path):
    (tmp_path / "afile").write_text("")
    port = free_port()
    config = {"proxy_location": "HeadOnly", "http_options": {"host": "127.0.0.1", "port": port},
              "applications": [{"name": "tessera", "route_prefix": "/", "import_path": "serve.app:build_app",
                                "args": {"models": [], "service": {
                                    "default_index": None, "spare_task_workers": 0,
                                    "task_store": f"sqlite:///{tmp_path / 'afile' / 'tasks.db'}"}}}]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TESSERA_API_KEYS")}
    env["TESSERA_HOME"] = str(tmp_path / "home")
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "ray.serve.scripts", "run", "--address", "local",
                                    str(tmp_path / "config.yaml")], env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True, cwd=Path(__file__).resolve().parents[2])
    try:
        text = wait_failed(process, log)
    finally:
        process.send_signal(signal.SIGINT)  # serve run shuts Serve and its own Ray down
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
    failure = text.split(FAILED, 1)[1]
    assert f"ServeConfigError: field 'args.service.task_store': the task store sqlite:///{tmp_path / 'afile'}" \
           "/tasks.db cannot be opened (FileExistsError" in failure, failure
    assert "Adding 1 replica to Deployment(name='api'" not in text  # no ingress replica was started to fail


#: What Serve's controller logs when an application ends DEPLOY_FAILED, before the reason.
FAILED = "Deploying app 'tessera' failed with exception"


def wait_failed(process: subprocess.Popen, log: Path, timeout_s: float = 240) -> str:
    """``serve run``'s output once the controller has logged the application's failure and its reason."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        assert process.poll() is None, text[-3000:]
        if FAILED in text and "ServeConfigError" in text.split(FAILED, 1)[1]:
            return text
        time.sleep(1)
    raise AssertionError(f"the app did not fail to deploy in time:\n{log.read_text(errors='replace')[-3000:]}")
