"""``tessera serve`` refuses, in one line and with status 2, what would otherwise start a broken or unsafe service:
a port another process has (Ray's proxy binds with SO_REUSEPORT, so a second service on it would get half of the
requests, with its own keys or none), a task store that cannot be opened (a SQLite one would have the api
deployment retry forever; a PostgreSQL server that refuses or never answers is given up on after its connect
timeout), an unreadable ``$TESSERA_MODELS``, a ``$TESSERA_HOME`` under a plain file, a broken config, and bad
values (a port out of range, a ``$TESSERA_API_KEYS`` that holds no key or a short one). The start checks run before
any Ray starts; each would have started Serve before. One refusal runs in a real ``tessera serve`` process (its exit
status and stderr); the others call ``flows.commands.main`` in-process with the environment and working directory
that process would get (the same checks without a second of imports each), Serve's start replaced by a failure."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.flows.conftest import app_args_checked_in_process
from tests.text_checks import TRACEBACK

from flows.commands import main

REPO = Path(__file__).resolve().parents[2]
CONFIG = str(REPO / "serve" / "config.yaml")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def small_config(tmp_path) -> Path:
    """A config with no models and no default index: what would start (quickly) if nothing were refused."""
    def write(**service) -> Path:
        config = {"http_options": {"host": "127.0.0.1", "port": _free_port()},
                  "applications": [{"name": "tessera", "route_prefix": "/", "import_path": "serve.app:build_app",
                                    "args": {"models": [], "service": {"default_index": None, **service}}}]}
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        return path
    return write


def tessera_serve(*args: str, tmp_path: Path, preexec_fn=None, **env: str) -> subprocess.CompletedProcess:
    """``tessera serve ARGS --address local`` in its own process group (``preexec_fn`` run in the child first, e.g. a
    file size limit); one that starts Serve instead of refusing is stopped (its whole group, by its id) and fails the
    test."""
    environ = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TESSERA_API_KEYS", "TESSERA_MODELS")}
    environ.update({"TESSERA_HOME": str(tmp_path / "home"), **env})
    process = subprocess.Popen([sys.executable, "-m", "flows", "serve", *args, "--address", "local"], cwd=tmp_path,
                               env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=preexec_fn)
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("tessera serve started instead of refusing")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.fixture
def serve_in_process(monkeypatch, capsys):
    """``serve_in_process(*args, tmp_path=..., **env)``: what ``tessera_serve`` checks, through ``main`` in this process
    (its environment, working directory, exit status, stdout and stderr); starting Serve fails the test instead."""
    from flows.commands import serve as serve_command

    def refuse_to_start(command, env, **_):
        pytest.fail("tessera serve started instead of refusing")

    def run(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
        with monkeypatch.context() as patch:
            for name in ("RAY_ADDRESS", "TESSERA_API_KEYS", "TESSERA_MODELS"):
                patch.delenv(name, raising=False)
            for name, value in {"TESSERA_HOME": str(tmp_path / "home"), **env}.items():
                patch.setenv(name, value)
            patch.chdir(tmp_path)
            patch.setattr(serve_command, "run_serve", refuse_to_start)
            capsys.readouterr()
            status = main(["serve", *args, "--address", "local"])
            out = capsys.readouterr()
        return subprocess.CompletedProcess(["tessera", "serve", *args], status, out.out, out.err)

    return run


@pytest.mark.parametrize("reuse_port", [False, True])  # True: the socket a Ray Serve proxy holds
@pytest.mark.process
def test_a_port_another_process_listens_on_is_refused(small_config, tmp_path, reuse_port, serve_in_process):
    refused_by = tessera_serve if reuse_port else serve_in_process  # the one real `tessera serve` process here
    with socket.socket() as listener:
        if reuse_port:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        done = refused_by("--config", str(small_config()), "--port", str(port), tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"field '--port': port {port} on 127.0.0.1 is not free" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "home" / "serve").exists()  # refused before anything was written or started


def test_a_task_store_under_a_plain_file_is_refused(small_config, tmp_path, serve_in_process):
    (tmp_path / "afile").write_text("not a folder")
    config = small_config(task_store=f"sqlite:///{tmp_path}/afile/tasks.db")
    done = serve_in_process("--config", str(config), tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert (f"field 'args.service.task_store': the task store {tmp_path}/afile/tasks.db cannot be opened: "
            f"{tmp_path}/afile is a file, not a folder") in done.stderr
    (tmp_path / "junk.db").write_text("this is no SQLite database, " * 200)
    done = serve_in_process("--config", str(small_config(task_store=f"sqlite:///{tmp_path}/junk.db")),
                            tmp_path=tmp_path)
    assert done.returncode == 2 and "the task store" in done.stderr and "not a database" in done.stderr


@pytest.mark.process
def test_a_task_store_another_tessera_serve_holds_is_refused(small_config, tmp_path, serve_in_process):
    """A second service on the same SQLite store took the first one's running tasks for interrupted ones (their
    workers live in the other's Ray cluster): failed them, deleted their uploads, let a second ingestion start."""
    import fcntl

    config = small_config(task_store=f"sqlite:///{tmp_path}/tasks.db")
    with open(tmp_path / "tasks.db.serve.lock", "a+") as held:  # what the running service's process holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242\n")
        held.flush()
        done = serve_in_process("--config", str(config), tmp_path=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert (f"field 'args.service.task_store': the task store {tmp_path}/tasks.db is in use by another tessera serve "
            "(pid 4242)") in done.stderr
    with pytest.raises(pytest.fail.Exception, match="started instead of refusing"):  # released: it starts
        serve_in_process("--config", str(config), tmp_path=tmp_path)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("server", ["refusing", pytest.param("silent", marks=pytest.mark.slow)])  # silent: 5 s of
# waiting; its message is checked in-process in tests/serve/test_taskstore_connect.py
def test_a_postgresql_store_that_refuses_or_never_answers_is_refused_without_its_password(small_config, tmp_path,
                                                                                        server, serve_in_process):
    """"silent": a local port that listens and never accepts (as a host that drops packets): the check gives up after
    its connect timeout instead of hanging. The check of a store that opens: tests/serve/test_taskstore_connect.py."""
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        if server == "silent":
            listener.listen(0)
        url = f"postgresql+psycopg://tessera:s3cret@127.0.0.1:{listener.getsockname()[1]}/tasks"
        done = serve_in_process("--config", str(small_config(task_store=url)), tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "s3cret" not in done.stderr
    assert "field 'args.service.task_store': the task store postgresql+psycopg://tessera:***@127.0.0.1:" in done.stderr
    problem = "Connection refused" if server == "refusing" else "ConnectionTimeout: connection timeout expired"
    assert problem in done.stderr, done.stderr
    assert not (tmp_path / "home" / "serve").exists()  # refused before anything was written or started


def test_a_home_under_a_plain_file_and_an_unreadable_models_file_are_refused(small_config, tmp_path, serve_in_process):
    (tmp_path / "afile").write_text("not a folder")
    done = serve_in_process("--config", str(small_config()), tmp_path=tmp_path, TESSERA_HOME=str(tmp_path / "afile/h"))
    assert done.returncode == 2, done.stderr
    assert "field 'TESSERA_HOME'" in done.stderr and f"{tmp_path}/afile is a file, not a folder" in done.stderr
    done = serve_in_process("--config", str(small_config()), tmp_path=tmp_path,
                            TESSERA_MODELS="/nonexistent/models.yaml")
    assert done.returncode == 2, done.stderr
    assert "field 'TESSERA_MODELS': TESSERA_MODELS names /nonexistent/models.yaml, which cannot be read" in done.stderr


def test_a_broken_config_is_one_line_naming_the_file(tmp_path, capsys):
    broken, listed = tmp_path / "bad.yaml", tmp_path / "list.yaml"
    broken.write_text("http_options: {port: [8000\n")
    listed.write_text("- http_options\n- applications\n")
    for path, problem in ((broken, "is not valid YAML (line 2, column 1)"), (listed, "is a YAML list, not a mapping")):
        assert main(["serve", "--config", str(path), "--print-config"]) == 2
        assert f"field '--config': the Serve config {path} {problem}" in capsys.readouterr().err
    listed.write_text(yaml.safe_dump({"applications": {"name": "tessera"}}))
    assert main(["serve", "--config", str(listed), "--print-config"]) == 2
    assert "field 'applications'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def shipped_config_status() -> int:
    """``tessera serve --config serve/config.yaml --print-config``'s exit status, run once for the module: every
    check passes the config as shipped, its app args' included (``serve.check_args``, a child process of about a
    second that each misspelt-setting case below paid again for the same file; here in this process)."""
    with app_args_checked_in_process():
        return main(["serve", "--config", CONFIG, "--print-config"])


@pytest.mark.parametrize("edit, field, hint", [
    (lambda c: c["http_options"].update(hots="0.0.0.0"), "http_options.hots", "did you mean 'host'?"),
    (lambda c: c["applications"][0].update(route_prefx="/"), "applications.0.route_prefx", "'route_prefix'"),
    (lambda c: c.update(proxy_locaton="EveryNode"), "proxy_locaton", "did you mean 'proxy_location'?"),
    (lambda c: c["applications"][0].update(deployments=[{"name": "api", "num_replica": 2}]),
     "applications.0.deployments.0.num_replica", "did you mean 'num_replicas'?"),
])
def test_a_misspelt_serve_setting_is_refused_naming_it(tmp_path, capsys, edit, field, hint, shipped_config_status):
    """Ray's schema ignores a key it does not know: ``hots`` left the service on 127.0.0.1 without a word."""
    config = yaml.safe_load((REPO / "serve" / "config.yaml").read_text())
    edit(config)
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["serve", "--config", str(path), "--print-config"]) == 2
    err = capsys.readouterr().err
    assert f"field '{field}'" in err and f"unknown Serve setting '{field}'" in err and hint in err, err
    assert shipped_config_status == 0  # as shipped


@pytest.mark.parametrize("edit, field, words", [
    (lambda c: c["applications"][0].update(deployments=[{"name": "minilm-rerank", "num_replicas": 0}]),
     "applications.0.deployments.0.num_replicas", "Input should be greater than 0"),
    (lambda c: c["applications"][0].update(deployments=[{"name": "tessera-cross-encodr", "max_ongoing_requests": 32}]),
     "deployments.0.name", "no deployment named 'tessera-cross-encodr' in this application; did you mean "
     "'tessera-cross-encoder'"),
    (lambda c: c["applications"][0].pop("import_path"), "applications.0.import_path", "Field required"),
])
def test_a_value_serve_refuses_is_one_line_naming_it(tmp_path, capsys, edit, field, words, shipped_config_status):
    """``num_replicas: 0`` was Serve's pydantic traceback from ``serve run``; a ``deployments`` entry naming no
    deployment of the app (a typo) failed the app once Ray and Serve had started ("Deployment ... does not
    exist")."""
    config = yaml.safe_load((REPO / "serve" / "config.yaml").read_text())
    edit(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    with app_args_checked_in_process():
        assert main(["serve", "--config", str(path), "--print-config"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tessera: error: field '{field}': ") and words in err, err
    assert len(err.strip().splitlines()) == 1 and TRACEBACK not in err
    assert shipped_config_status == 0


@pytest.mark.parametrize("where", ["model", "override"])
def test_more_gpus_than_this_machine_has_are_refused_when_serve_starts_its_own_ray(tmp_path, serve_in_process,
                                                                                   where):
    """A replica that asks for a GPU a new local Ray will never have waited forever: the app stayed loading."""
    from ray._private.accelerators import get_accelerator_manager_for_resource

    asked = get_accelerator_manager_for_resource("GPU").get_current_node_num_accelerators() + 1
    model = {"name": "minilm", "op": "embed.sentence_transformer", "params": {"model": "all-MiniLM-L6-v2"}}
    application = {"name": "tessera", "route_prefix": "/", "import_path": "serve.app:build_app",
                   "args": {"models": [model], "service": None}}
    if where == "model":
        model["num_gpus"] = asked
        field = "applications.0.args.models.0.num_gpus"
    else:
        application["deployments"] = [{"name": "minilm", "ray_actor_options": {"num_gpus": asked}}]
        field = "applications.0.deployments.0.ray_actor_options.num_gpus"
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump({"http_options": {"host": "127.0.0.1", "port": _free_port()},
                                    "applications": [application]}))
    done = serve_in_process("--config", str(path), tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tessera: error: field '{field}': it asks for {asked} GPU per replica"), done.stderr
    assert "remove num_gpus" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("port", ["0", "99999", "http"])
def test_a_port_out_of_range_is_refused(port, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--config", CONFIG, "--port", port, "--print-config"])
    assert exit_.value.code == 2
    assert f"expected a port number from 1 to 65535, got '{port}'" in capsys.readouterr().err


@pytest.mark.parametrize("value, problem", [(",", "is set but holds no key"), ("  ", "is set but holds no key"),
                                            ("short-key", "1 key(s) shorter than 16 characters")])
def test_keys_that_are_none_or_short_are_refused(monkeypatch, capsys, value, problem):
    monkeypatch.setenv("TESSERA_API_KEYS", value)
    assert main(["serve", "--config", CONFIG, "--print-config"]) == 2
    err = capsys.readouterr().err
    said = problem if "short" in problem else f"TESSERA_API_KEYS {problem}"  # the field names it once
    assert f"field 'TESSERA_API_KEYS': {said}" in err
    assert "short-key" not in err  # a key is never printed
    if "short" in problem:  # a new key of its own would be a new tenant: the message says how to keep the old one's
        from operators.api_keys import env_key_id, key_hash

        assert f"to keep those of {env_key_id(key_hash(value))}, make each new key with its old id" in err
        assert "tessera keys new --id ID" in err


@pytest.mark.parametrize("key", ["clé-du-service-2026-long", "tab\tin-a-long-enough-key"])
def test_a_key_no_client_sends_alike_is_refused_by_its_id_not_printed(monkeypatch, capsys, key):
    """A key with "é" was taken, but a client sends it as UTF-8 bytes (curl) or Latin-1 (requests), and the
    service reads a header as Latin-1: curl's requests were refused with that key."""
    from operators.api_keys import env_key_id, key_hash

    monkeypatch.setenv("TESSERA_API_KEYS", f"{'a' * 24},{key}")
    assert main(["serve", "--config", CONFIG, "--print-config"]) == 2
    err = capsys.readouterr().err
    assert (f"field 'TESSERA_API_KEYS': 1 key(s) ({env_key_id(key_hash(key))}) with characters other than printable "
            "ASCII") in err
    assert key not in err and "a" * 24 not in err


def test_a_home_other_users_may_read_is_named_when_the_service_has_keys(tmp_path):
    """The service's own files are private, but an open $TESSERA_HOME still shows others the names in it and what
    was written there before or by the CLI: the warning says so."""
    from flows.commands.serve_checks import home_readable_by_others

    home = tmp_path / "home"
    home.mkdir()
    with_keys = {"applications": [{"args": {"service": {"api_keys": [{"id": "alice", "sha256": "0" * 64}]}}}]}
    without = {"applications": [{"args": {"service": {}}}]}
    home.chmod(0o755)
    note = home_readable_by_others(with_keys, home)
    assert note is not None and f"chmod 700 {home}" in note and "mode 755" in note
    assert "makes its own files private" in note and "list the names" in note
    assert home_readable_by_others(without, home) is None  # one user on loopback: nobody else's data
    home.chmod(0o700)
    assert home_readable_by_others(with_keys, home) is None


def test_an_index_named_by_index_must_be_there_as_run_requires(small_config, tmp_path, serve_in_process):
    """``tessera serve --index nosuch`` started (a minute of model loading) and then answered every search with 503."""
    from flows.commands.serve_checks import check_named_index
    from operators.store import Index

    done = serve_in_process("--config", str(small_config()), "--index", "nosuch", tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tessera: error: field '--index': no index at {tmp_path}/home/indices/nosuch")
    assert not (tmp_path / "home" / "serve").exists()  # refused before anything was written or started
    (tmp_path / "empty").mkdir()  # a folder with no manifest is no index either
    done = serve_in_process("--config", str(small_config()), "--index", str(tmp_path / "empty"), tmp_path=tmp_path)
    assert done.returncode == 2 and f"no index at {tmp_path}/empty" in done.stderr
    check_named_index(str(Index.create(tmp_path / "idx", {"dense": False}).path))  # an index, even empty, passes
    check_named_index(None)  # the config's default (a folder that may come later) is not checked


@pytest.mark.parametrize("setting", ["index_roots", "data_roots"])
def test_a_root_folder_that_is_not_there_is_refused(small_config, tmp_path, serve_in_process, setting):
    """A misspelt root started the service, which then answered each request naming an index or a file there with a
    404 or a 422."""
    (tmp_path / "indices").mkdir()
    (tmp_path / "afile").write_text("not a folder")
    for root, said in [("indexes", f"'indexes' does not exist ({tmp_path}/indexes)"),
                       (f"{tmp_path}/afile", f"'{tmp_path}/afile' is a file, not a folder")]:
        done = serve_in_process("--config", str(small_config(**{setting: ["indices", root]})), tmp_path=tmp_path)
        assert done.returncode == 2, done.stderr
        assert f"field 'args.service.{setting}.1': {said}: create the folder or fix the path" in done.stderr
        assert not (tmp_path / "home" / "serve").exists()


def test_a_config_indented_with_a_tab_says_to_use_spaces(tmp_path, capsys):
    """PyYAML's "found character '\\t' that cannot start any token" alone, where a spec file's reader says the fix."""
    config = tmp_path / "tabs.yaml"
    config.write_text("http_options:\n  host: 127.0.0.1\n\tport: 8000\n")
    assert main(["serve", "--config", str(config), "--print-config"]) == 2
    assert (f"field '--config': the Serve config {config} is not valid YAML (line 3, column 1): found character '\\t' "
            "that cannot start any token; YAML indents with spaces, not tabs: replace the tab with spaces"
            ) in capsys.readouterr().err


def test_a_relative_or_home_sqlite_task_store_is_one_file_for_the_check_and_the_service(tmp_path, monkeypatch):
    """``sqlite:///~/tasks.db``: the start check opened $HOME/tasks.db, the service ./~/tasks.db under its Ray
    worker's working directory; a relative path too was the worker's, not where ``tessera serve`` ran."""
    from flows.commands.serve import apply_overrides
    from serve.service_settings import ServiceArgs, resolve

    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.chdir(tmp_path)
    for given, path in [("sqlite:///~/tasks.db", tmp_path / "me" / "tasks.db"),
                        ("sqlite:///state/tasks.db", tmp_path / "state" / "tasks.db")]:
        config = {"applications": [{"args": {"service": {"default_index": None, "task_store": given}}}]}
        apply_overrides(config, host=None, port=None, index=None)
        assert config["applications"][0]["args"]["service"]["task_store"] == f"sqlite:///{path}"
        assert resolve(ServiceArgs(default_index=None, task_store=given))["task_store"] == f"sqlite:///{path}"
    kept = "postgresql+psycopg://tessera:secret@db/tasks"
    assert resolve(ServiceArgs(default_index=None, task_store=kept))["task_store"] == kept


def test_the_apps_settings_beside_args_say_to_move_them_under_it(tmp_path, capsys):
    """``service:`` beside ``args:`` listed Serve's application settings, none of which it is."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"applications": [{"name": "tessera", "import_path": "serve.app:build_app",
                                                        "service": {"default_index": None}}]}))
    assert main(["serve", "--config", str(config), "--print-config"]) == 2
    assert ("field 'applications.0.service': " in (err := capsys.readouterr().err)
            and "the app's own settings (service, models, llms, ...) go under args: move it to "
                "applications.0.args.service" in err)


def test_the_default_index_outside_a_clone_is_the_homes_sample(tmp_path, monkeypatch):
    """The packaged config's default index is make demo's, ``.tessera/indices/sample`` in the working folder; a user of
    an installed wheel makes it with ``tessera ingest --index sample``, in ``$TESSERA_HOME``, and the service looked
    for it in vain: it reads that one when the working folder has none (make demo's first, where both are)."""
    from flows.commands.serve import apply_overrides

    def default_index() -> str:
        config = {"applications": [{"args": {"service": {"default_index": ".tessera/indices/sample"}}}]}
        apply_overrides(config, host=None, port=None, index=None)
        return config["applications"][0]["args"]["service"]["default_index"]

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert default_index() == str(tmp_path / ".tessera" / "indices" / "sample")  # neither: the message names this
    (tmp_path / "home" / "indices" / "sample").mkdir(parents=True)
    (tmp_path / "home" / "indices" / "sample" / "manifest.json").write_text("{}")
    assert default_index() == str(tmp_path / "home" / "indices" / "sample")
    (tmp_path / ".tessera" / "indices" / "sample").mkdir(parents=True)
    (tmp_path / ".tessera" / "indices" / "sample" / "manifest.json").write_text("{}")
    assert default_index() == str(tmp_path / ".tessera" / "indices" / "sample")
