"""The numbers environment variables set (timeouts, grace periods, thread counts): a value that is no such number
is refused naming the variable, where it is read and, for those ``tessera serve`` carries to its replicas, before
Serve starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.commands import main
from operators.env_numbers import env_count, env_seconds
from operators.errors import SettingError

CONFIG = str(Path(__file__).resolve().parents[2] / "serve" / "config.yaml")


@pytest.mark.parametrize("raw, seconds", [("2.5", 2.5), (" 0 ", 0.0), ("1e2", 100.0), ("", 7.0), ("  ", 7.0)])
def test_seconds_are_read_and_an_empty_variable_is_unset(raw, seconds):
    assert env_seconds("X_S", 7.0, environ={"X_S": raw}) == seconds
    assert env_seconds("X_S", 7.0, environ={}) == 7.0


@pytest.mark.parametrize("raw", ["soon", "-1", "nan", "inf", "10s"])
def test_what_is_no_number_of_seconds_is_refused_naming_the_variable(raw):
    with pytest.raises(SettingError, match=rf"^X_S must be a number of seconds, 0 or more \(got '{raw}'\)$"):
        env_seconds("X_S", 7.0, environ={"X_S": raw})


def test_a_timeout_may_not_be_zero():
    with pytest.raises(SettingError, match=r"X_S must be a number of seconds, more than 0 \(got '0'\)"):
        env_seconds("X_S", 7.0, zero=False, environ={"X_S": "0"})
    assert env_seconds("X_S", 7.0, zero=False, environ={"X_S": "0.5"}) == 0.5


@pytest.mark.parametrize("raw, problem", [("two", True), ("0", True), ("-3", True), ("1.5", True), ("3", False)])
def test_counts_are_whole_numbers_from_one(raw, problem):
    if problem:
        with pytest.raises(SettingError, match=rf"^N must be a whole number, 1 or more \(got '{raw}'\)$"):
            env_count("N", None, environ={"N": raw})
    else:
        assert env_count("N", None, environ={"N": raw}) == 3
    assert env_count("N", None, environ={"N": ""}) is None


@pytest.mark.parametrize("name, value, words", [
    ("TESSERA_PLACEMENT_TIMEOUT_S", "ten", "a number of seconds, more than 0 (got 'ten')"),
    ("TESSERA_PLACEMENT_TIMEOUT_S", "0", "a number of seconds, more than 0 (got '0')"),
    ("TESSERA_NODE_LOSS_GRACE_S", "-5", "a number of seconds, 0 or more (got '-5')"),
    ("TESSERA_LLM_THREADS", "all", "a whole number, 1 or more (got 'all')"),
])
def test_tessera_serve_refuses_a_setting_its_replicas_would_fail_on(monkeypatch, capsys, name, value, words):
    monkeypatch.setenv(name, value)
    assert main(["serve", "--config", CONFIG, "--print-config"]) == 2
    assert capsys.readouterr().err.strip() == f"tessera: error: {name} must be {words}"


def test_the_node_watch_and_the_embedded_models_threads_read_their_variables(monkeypatch):
    from flows.executors.ray_nodes import NodeWatch
    from operators.llm.embedded_model import load

    monkeypatch.setenv("TESSERA_NODE_LOSS_GRACE_S", "45")
    assert NodeWatch(nodes=list).grace_s == 45.0
    monkeypatch.setenv("TESSERA_NODE_LOSS_GRACE_S", "later")
    with pytest.raises(SettingError, match="TESSERA_NODE_LOSS_GRACE_S must be a number of seconds"):
        NodeWatch(nodes=list)
    monkeypatch.setenv("TESSERA_LLM_THREADS", "many")
    with pytest.raises(SettingError, match="TESSERA_LLM_THREADS must be a whole number"):
        load("smollm2-135m-instruct")  # refused before the model is looked for or loaded


def test_tessera_serve_refuses_such_a_setting_in_the_configs_own_env_vars(tmp_path, capsys):
    import yaml

    config = yaml.safe_load(Path(CONFIG).read_text())
    application = config["applications"][0]
    application.setdefault("runtime_env", {})["env_vars"] = {"TESSERA_NODE_LOSS_GRACE_S": "two minutes"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["serve", "--config", str(tmp_path / "config.yaml"), "--print-config"]) == 2
    assert capsys.readouterr().err.strip() == (
        "tessera: error: field 'runtime_env.env_vars': TESSERA_NODE_LOSS_GRACE_S must be a number of seconds, 0 or "
        f"more (got 'two minutes') in application '{application['name']}'")
