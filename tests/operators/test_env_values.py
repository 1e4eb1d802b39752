"""Settings read from the environment by ``operators``: empty or blank counts as unset everywhere, a count has an
upper bound where the library it feeds has one, a bad ``COLUMNS`` is ignored, and the home folder is absolute."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from operators.env_numbers import env_columns, env_count
from operators.errors import SettingError
from operators.home import tessera_home
from operators.llm.embedded_model import threads_setting
from operators.outbound import MODE_ENV, OutboundPolicy, OutboundURLError, check_url, use_local_policy_unless_set


def test_a_count_above_its_bound_is_refused_naming_the_variable_and_the_bound():
    assert env_count("N", None, most=8, environ={"N": "8"}) == 8
    with pytest.raises(SettingError, match=r"^N must be at most 8 \(got '9'\)$"):
        env_count("N", None, most=8, environ={"N": "9"})
    assert env_count("N", None, environ={"N": "99999999"}) == 99999999  # no bound given: none


def test_llm_threads_stop_at_ggmls_limit():
    assert threads_setting({"TESSERA_LLM_THREADS": "512"}) == 512
    with pytest.raises(SettingError, match=r"^TESSERA_LLM_THREADS must be at most 512 \(got '99999999'\)$"):
        threads_setting({"TESSERA_LLM_THREADS": "99999999"})


@pytest.mark.parametrize("raw, width", [("abc", 120), ("-5", 120), ("0", 120), ("", 120), (" ", 120), ("1", 20),
                                        ("80", 80), (" 200 ", 200)])
def test_columns_is_read_as_python_reads_it(raw, width):
    assert env_columns(environ={"COLUMNS": raw}) == width
    assert env_columns(environ={}) == 120


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_a_blank_tessera_outbound_is_the_clis_local_default(monkeypatch, blank):
    monkeypatch.setenv(MODE_ENV, blank)
    use_local_policy_unless_set()
    assert os.environ[MODE_ENV] == "local"
    check_url("http://127.0.0.1:11434/api", resolve=False)  # loopback allowed, as the CLI's default allows it
    monkeypatch.setenv(MODE_ENV, "server")
    use_local_policy_unless_set()
    assert os.environ[MODE_ENV] == "server"  # a value given is kept


@pytest.mark.parametrize("blank", ["", " "])
def test_a_blank_tessera_outbound_is_the_services_server_default(blank):
    assert OutboundPolicy.from_env({MODE_ENV: blank}) == OutboundPolicy.from_env({})
    with pytest.raises(OutboundURLError):
        check_url("http://127.0.0.1:11434/api", policy=OutboundPolicy.from_env({MODE_ENV: blank}), resolve=False)


def test_a_relative_tessera_home_is_made_absolute(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_HOME", "rel")
    assert tessera_home() == tmp_path / "rel"
    monkeypatch.chdir(tmp_path.parent)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "link"))
    (tmp_path / "link").symlink_to(tmp_path / "rel")
    assert tessera_home() == tmp_path / "link"  # absolute, links kept as given


def test_a_tessera_home_with_dot_dot_names_the_folder_plainly(monkeypatch, tmp_path):
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    monkeypatch.setenv("TESSERA_HOME", "../home/./t")
    assert str(tessera_home()) == str(tmp_path / "home" / "t")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "repo" / "link").symlink_to(tmp_path / "deep" / "er")
    monkeypatch.setenv("TESSERA_HOME", "link/../t")  # after a link, `..` is the target's parent: kept as given
    assert tessera_home() == tmp_path / "repo" / "link" / ".." / "t"
    assert tessera_home().resolve() == tmp_path / "deep" / "t"


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_tessera_home_is_unset(monkeypatch, tmp_path, blank):
    monkeypatch.setenv("TESSERA_HOME", blank)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert tessera_home() == tmp_path / ".tessera"
    monkeypatch.setenv("TESSERA_HOME", "~/elsewhere")
    assert tessera_home() == tmp_path / "elsewhere"


@pytest.mark.parametrize("tessera_home_value", [None, "", " ", "~/t"])
def test_an_empty_home_is_refused_naming_both_variables(monkeypatch, tessera_home_value):
    monkeypatch.setenv("HOME", "")
    if tessera_home_value is None:
        monkeypatch.delenv("TESSERA_HOME", raising=False)
    else:
        monkeypatch.setenv("TESSERA_HOME", tessera_home_value)
    with pytest.raises(SettingError, match=r"^TESSERA_HOME .* and HOME is empty: set TESSERA_HOME to Tessera's folder, "
                                           r"or HOME to yours$"):
        tessera_home()


def test_a_tessera_home_given_needs_no_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", "")
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    assert tessera_home() == Path(tmp_path)
