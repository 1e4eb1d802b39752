"""``tessera serve`` carries its environment in the config it runs, so the keys and settings hold when the app is
built on a Ray cluster that was already running (``--address``), whose workers have the raylet's environment:
``$TESSERA_API_KEYS`` as SHA-256 hashes in ``args.service.api_keys`` (never the raw keys), ``$TESSERA_HOME``,
the outbound policy and the other settings in each application's ``runtime_env.env_vars``. The last test starts a
real head without those variables and a real ``tessera serve --address`` against it."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.flows.conftest import free_ports, service_only_config

from flows.commands import main
from flows.commands.serve import CARRIED

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "serve" / "config.yaml")
KEYS = ("alphakey123-0123456789", "betakey456-0123456789")
pytestmark = pytest.mark.usefixtures("app_args_in_process")  # serve.check_args in this process


def sha(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def printed_config(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["serve", "--config", CONFIG, *args, "--print-config"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


@pytest.fixture
def environment(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_API_KEYS", ", ".join(KEYS))
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TESSERA_ALLOW_HOSTS", "loopback")
    monkeypatch.setenv("TESSERA_MODELS", "models.yaml")  # relative: made absolute where the command runs
    # the command sets the server's outbound policy in its own environment before it execs: put the test's back
    monkeypatch.setenv("TESSERA_OUTBOUND", os.environ.get("TESSERA_OUTBOUND", "local"))
    for name in set(CARRIED) - {"TESSERA_ALLOW_HOSTS", "TESSERA_MODELS"}:  # the suite's own settings among them
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_the_environments_keys_are_hashed_into_the_config_and_settings_ride_in_its_runtime_env(environment, capsys):
    from ray.serve.schema import ServeDeploySchema

    from serve.service_settings import ServiceArgs, resolve

    config = printed_config(capsys, "--host", "0.0.0.0")  # keys from the environment: a public host is allowed
    app = config["applications"][0]
    service = app["args"]["service"]
    assert service["api_keys"] == [{"id": f"env-{sha(k)[:8]}", "sha256": sha(k)} for k in KEYS]
    assert app["runtime_env"]["env_vars"] == {
        "TESSERA_HOME": str(environment / "home"), "TESSERA_OUTBOUND": "server",
        "TESSERA_ALLOW_HOSTS": "loopback", "TESSERA_MODELS": str(environment / "models.yaml")}
    ServeDeploySchema.model_validate(config)  # what `serve run` checks first
    # Where the app is built on a cluster, the environment has no keys: the config's hashes are the keys.
    built = resolve(ServiceArgs.model_validate(service), environ={})
    assert built["keys"] == {sha(k): f"env-{sha(k)[:8]}" for k in KEYS}
    # And where it does have them (a local `serve run`), they are not counted twice.
    assert resolve(ServiceArgs.model_validate(service), environ={"TESSERA_API_KEYS": KEYS[0]})["keys"] == \
        built["keys"]


def test_the_written_config_holds_hashes_only_and_no_raw_key_reaches_serve_run(environment, gcs_stand_in, monkeypatch,
                                                                               capsys):
    import flows.commands.serve as serve_command

    started = []
    # `tessera serve` ends by running `serve run` as its child; here that records what would run, with which env.
    monkeypatch.setattr(serve_command, "run_serve", lambda argv, env, **_: started.append((argv, env)) or 0)
    monkeypatch.setenv("TESSERA_ALLOW_ENV", "COHERE_API_KEY")
    (environment / "models.yaml").write_text("{}\n")  # $TESSERA_MODELS must be a models file at start
    port = free_ports(1)[0]
    with gcs_stand_in() as cluster:  # a cluster answers at the --address (it is checked first)
        address = cluster.address
        assert main(["serve", "--config", CONFIG, "--port", str(port), "--address", address]) == 0
    (argv, env), = started
    written = environment / "home" / "serve" / f"config-{port}.yaml"
    assert argv[-4:] == ["run", str(written), "--address", address]
    text = written.read_text()
    assert all(raw not in text for raw in KEYS) and all(sha(raw) in text for raw in KEYS)
    assert written.stat().st_mode & 0o777 == 0o600  # the keys' hashes: the user's only, whatever the umask
    assert "TESSERA_API_KEYS" not in env and env["TESSERA_OUTBOUND"] == "server"
    assert os.environ["TESSERA_API_KEYS"]  # only the child's environment leaves them out
    assert "not carried to the cluster (secrets): $COHERE_API_KEY" in capsys.readouterr().err


def test_a_config_of_its_own_keeps_its_keys_and_env_vars(environment, capsys, tmp_path):
    config = yaml.safe_load(Path(CONFIG).read_text())
    app = config["applications"][0]
    app["args"]["service"]["api_keys"] = [{"id": "alice", "sha256": sha(KEYS[0])}]
    app["runtime_env"] = {"env_vars": {"TESSERA_HOME": "/srv/tessera", "OTHER": "1"}}
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(config))
    capsys.readouterr()
    assert main(["serve", "--config", str(path), "--print-config"]) == 0
    app = yaml.safe_load(capsys.readouterr().out)["applications"][0]
    assert app["args"]["service"]["api_keys"] == [{"id": "alice", "sha256": sha(KEYS[0])},
                                                  {"id": f"env-{sha(KEYS[1])[:8]}", "sha256": sha(KEYS[1])}]
    assert app["runtime_env"]["env_vars"]["TESSERA_HOME"] == "/srv/tessera"
    assert app["runtime_env"]["env_vars"]["OTHER"] == "1"


def test_raw_keys_in_the_configs_runtime_env_and_public_models_only_apps_are_refused(environment, capsys, tmp_path):
    config = yaml.safe_load(Path(CONFIG).read_text())
    config["applications"][0]["runtime_env"] = {"env_vars": {"TESSERA_API_KEYS": KEYS[0]}}
    path = tmp_path / "raw.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["serve", "--config", str(path), "--print-config"]) == 2
    assert "TESSERA_API_KEYS in runtime_env.env_vars would send raw keys" in capsys.readouterr().err
    config["applications"][0]["runtime_env"] = {}
    config["applications"][0]["args"]["service"] = None  # models only: no keys apply, whatever the environment
    path.write_text(yaml.safe_dump(config))
    assert main(["serve", "--config", str(path), "--host", "0.0.0.0", "--print-config"]) == 2
    assert "application 'tessera' has no service" in capsys.readouterr().err


@pytest.mark.parametrize("name, value, words", [
    ("TESSERA_QUERY_ENCODER", "bogus", "TESSERA_QUERY_ENCODER='bogus' is not one of auto, torch, onnx"),
    ("TESSERA_ALLOW_HOSTS", "not a host!", "TESSERA_ALLOW_HOSTS: 'host!' is not a host name, an address or a CIDR"),
])
def test_a_carried_setting_replicas_would_refuse_is_refused_before_serve_starts(environment, capsys, monkeypatch,
                                                                                 name, value, words):
    """Carried into every replica's environment unchecked, each failed there, in every request that read it."""
    monkeypatch.setenv(name, value)
    assert main(["serve", "--config", CONFIG, "--print-config"]) == 2
    assert words in capsys.readouterr().err


def test_a_models_file_the_replicas_could_not_read_is_refused_before_a_local_start(environment, capsys):
    from flows.commands.serve import check_models_file
    from flows.commands._support import CliError

    (environment / "models.yaml").write_text("dup: ollama_chat/a\ndup: ollama_chat/b\n")
    with pytest.raises(CliError) as err:
        check_models_file(os.environ)
    assert err.value.field == "TESSERA_MODELS" and "gives the key 'dup' twice" in err.value.message


# -- for real: a head whose raylet has neither the keys nor this TESSERA_HOME ----------------------------------


def _get(url: str, key: str | None = None) -> requests.Response:
    return requests.get(url, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=10)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])  # before: answered without a key / never started
def test_keys_and_home_hold_on_a_cluster_that_was_already_running(ray_cluster_tools, tmp_path, host):
    path, port = service_only_config(tmp_path / "config.yaml")
    home = tmp_path / "serve-home"
    with ray_cluster_tools.launch_head(tmp_path / "raylet-home") as head:  # the raylet's TESSERA_HOME differs
        env = {**head.env, "TESSERA_HOME": str(home), "TESSERA_API_KEYS": ",".join(KEYS), "RAY_AUTH_MODE": "token"}
        log = open(tmp_path / "serve.log", "wb")
        serving = subprocess.Popen([sys.executable, "-m", "flows", "serve", "--config", str(path), "--address",
                                    head.gcs, "--host", host], cwd=REPO, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 240
            while True:
                assert serving.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
                try:
                    if _get(base + "/tasks").headers.get("content-type", "").startswith("application/json"):
                        break
                except requests.RequestException:  # not listening yet, or a proxy without its app
                    pass
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
                time.sleep(2)
            assert _get(base + "/tasks").status_code == 401  # before the fix: 200, auth silently off
            assert _get(base + "/tasks", "wrong-key").status_code == 401
            assert _get(base + "/tasks", KEYS[1]).status_code == 200
            assert (home / "tasks.db").is_file()  # the task store under this shell's TESSERA_HOME
            assert not (tmp_path / "raylet-home" / "tasks.db").exists()
            assert all(raw not in (home / "serve" / f"config-{port}.yaml").read_text() for raw in KEYS)
        finally:
            serving.send_signal(signal.SIGINT)  # `serve run`: Ctrl-C deletes the app it deployed
            try:
                serving.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(serving.pid, signal.SIGKILL)
                serving.wait(30)
            log.close()
