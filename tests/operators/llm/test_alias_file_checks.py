"""The user's models file is checked as it is read: each problem is one error naming the file, never a quiet
guess (a key YAML reads as a number, a duplicated key, a folder skipped) or litellm's banner on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from operators.llm.aliases import ModelConfigError, aliases, key_env, missing_file, resolve, user_file

REPO = Path(__file__).resolve().parents[3]


def tessera(tmp_path: Path, models: Path | str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TESSERA_MODELS": str(models), "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "flows", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=180)


def tessera_here(monkeypatch, capfd, tmp_path: Path, models: Path, *args: str) -> subprocess.CompletedProcess:
    """``tessera ARGS`` in this process (litellm imported once for the module, not per command), its exit status and
    what it wrote to the file descriptors 1 and 2 (litellm's banner went to stdout with ``print``)."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    status = main(list(args))
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(args, status, out, err)


def test_an_alias_of_a_provider_litellm_does_not_know_is_refused_with_nothing_on_stdout(tmp_path, monkeypatch,
                                                                                          capfd):
    models = tmp_path / "np.yaml"
    models.write_text("noprov: nosuchprovider/x\nmine: openai/gpt-4o-mini\n")
    done = tessera_here(monkeypatch, capfd, tmp_path, models, "models", "--json")
    assert (done.returncode, done.stdout) == (2, "")
    assert f"the alias 'noprov' in {models} names 'nosuchprovider/x', whose provider litellm does not know" \
        in done.stderr
    # another alias of the same file still lists, as JSON alone (litellm's check prints nothing)
    done = tessera_here(monkeypatch, capfd, tmp_path, models, "models", "mine", "--json")
    assert done.returncode == 0, done.stderr
    row, = json.loads(done.stdout)["models"]
    assert (row["alias"], row["reachable"], row["why"]) == ("mine", False, "set OPENAI_API_KEY")


def test_a_run_with_that_alias_is_refused_before_it_starts(tmp_path, monkeypatch):
    models = tmp_path / "np.yaml"
    models.write_text("noprov: nosuchprovider/x\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    with pytest.raises(ModelConfigError, match="alias 'noprov' in .*np.yaml names 'nosuchprovider/x'"):
        key_env("noprov")  # what an LLM step declares before its flow runs


@pytest.mark.process
def test_a_models_file_that_is_not_utf8_is_one_error_naming_it(tmp_path):
    """Saved by Notepad on Windows (Windows-1252, CRLF): the error named the byte, and now what to do with the file."""
    models = tmp_path / "latin1.yaml"
    models.write_bytes("local: tessera/caf\xe9.gguf\r\n".encode("cp1252"))
    expected = (f"cannot read the models file {models}: it is not UTF-8 text (byte 0xe9 at offset 18); it reads as "
                "cp1252: save it as UTF-8 (iconv -f CP1252 -t UTF-8 FILE > NEW_FILE)")
    for args in (("models",), ("run", "answer_only", "-q", "hi")):
        done = tessera(tmp_path, models, *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"tessera: error: {expected}"


@pytest.mark.parametrize(("text", "problem"), [
    ('"": ollama_chat/a\n', "has an empty alias name (''): give it a name"),
    ("1: ollama_chat/a\ntrue: ollama_chat/b\n",
     'has the key 1 (line 1), which YAML reads as a number, a boolean or null, not a name: quote it ("1": ...)'),
    ("a: ollama_chat/a\ntrue: ollama_chat/b\n", "has the key true (line 2)"),
    ("3.10: ollama_chat/c\n", 'has the key 3.10 (line 1), which YAML reads as a number, a boolean or null, not a '
     'name: quote it ("3.10": ...)'),
    ("dup: ollama_chat/a\nother: ollama_chat/c\ndup: ollama_chat/b\n",
     "gives the key 'dup' twice (lines 1 and 3), and YAML would keep only the last: remove one"),
    ("x:\n  model: ollama_chat/a\n  timeout: 3\n  timeout: 4\n", "gives the key 'timeout' twice (lines 3 and 4)"),
])
def test_keys_yaml_would_take_quietly_are_refused_naming_the_file_and_the_key(tmp_path, monkeypatch, text, problem):
    models = tmp_path / "models.yaml"
    models.write_text(text)
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    with pytest.raises(ModelConfigError) as err:
        aliases()
    assert err.value.message.startswith(f"the models file {models} {problem}")


def test_quoted_names_and_yaml_merge_keys_are_kept(tmp_path, monkeypatch):
    models = tmp_path / "models.yaml"
    models.write_text('"3.10": ollama_chat/c\n"true": ollama_chat/t\n'
                      "base: &base {model: ollama_chat/a, timeout: 3}\nmore: {<<: *base, timeout: 9}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    found = aliases()
    assert (found["3.10"].model, found["true"].model) == ("ollama_chat/c", "ollama_chat/t")
    assert (found["more"].model, found["more"].timeout) == ("ollama_chat/a", 9)


def test_a_blank_tessera_models_counts_as_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.setenv("TESSERA_MODELS", "  ")
    assert user_file() is None
    assert "local" in aliases()


def test_a_folder_at_tessera_home_models_yaml_is_an_error_as_one_named_by_tessera_models_is(tmp_path, monkeypatch):
    (tmp_path / "models.yaml").mkdir()
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv("TESSERA_MODELS", raising=False)
    with pytest.raises(ModelConfigError, match=f"TESSERA_HOME/models.yaml is {tmp_path / 'models.yaml'}, which is "
                       "not a file"):
        aliases()
    monkeypatch.setenv("TESSERA_MODELS", str(tmp_path / "models.yaml"))
    with pytest.raises(ModelConfigError, match="TESSERA_MODELS names .*, which is not a file"):
        aliases()


def test_a_relative_gguf_path_in_an_alias_is_read_from_the_models_files_folder(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    models = folder / "models.yaml"
    models.write_text("mine: tessera/weights/m.gguf\nfar: tessera//elsewhere/m.gguf\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    monkeypatch.chdir(tmp_path)  # not the file's folder
    assert resolve("mine").model == f"tessera/{folder}/weights/m.gguf"
    assert missing_file("mine") == str(folder / "weights" / "m.gguf")
    (folder / "weights").mkdir()
    (folder / "weights" / "m.gguf").write_bytes(b"GGUF")
    assert missing_file("mine") is None
    assert resolve("far").model == "tessera//elsewhere/m.gguf"  # absolute: as it is


def refusal(tmp_path: Path, monkeypatch, text: str) -> tuple[Path, ModelConfigError]:
    """A models file holding ``text``, in force, and the error reading it raises."""
    models = tmp_path / "m.yaml"
    models.write_text(text)
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    with pytest.raises(ModelConfigError) as err:
        aliases()
    return models, err.value


def test_a_misspelt_key_of_an_entry_is_named_with_the_close_key(tmp_path, monkeypatch):
    """``mine: {modle: openai/x}`` was "field 'mine.model': Field required", which never named ``modle``."""
    models, refused = refusal(tmp_path, monkeypatch, "mine: {modle: openai/x}\n")
    assert refused.field == "mine.modle"
    assert refused.message.startswith(f"unknown key 'modle' (in {models}); did you mean 'model'? (keys: "), \
        refused.message


def test_aliases_under_a_models_key_are_told_to_go_to_the_top_level(tmp_path, monkeypatch):
    """``models: {mine: {model: ...}}`` (a config file's habit) said "unknown key 'mine'" of an alias named models."""
    models, refused = refusal(tmp_path, monkeypatch,
                              "models:\n  mine: {model: openai/x}\n  other: ollama_chat/gemma2\n")
    assert refused.field == "models"
    assert "without a `models:` key above them: remove that level (its entries: mine, other)" in refused.message
    models.write_text("models: {model: openai/x}\n")  # an alias that is named models stays one
    assert aliases()["models"].model == "openai/x"


@pytest.mark.parametrize(("text", "problem"), [
    ("mine: openai/x\n  bad: indent\n", "mapping values are not allowed here (line 2, column 6); line 2 is indented "
     "more than line 1: the keys of one mapping are indented alike"),
    ("mine:\n\tmodel: openai/x\n", "found character '\\t' that cannot start any token (line 2, column 1); YAML "
     "indents with spaces, not tabs: replace the tab with spaces"),
])
def test_a_models_file_that_is_not_yaml_is_said_with_its_line_and_column(tmp_path, monkeypatch, text, problem):
    """PyYAML's own text was passed on: ``in "<unicode string>", line 2, column 6`` and a snippet with its caret."""
    models, err = refusal(tmp_path, monkeypatch, text)
    assert err.message == f"the models file {models} is not valid YAML: {problem}"


@pytest.mark.parametrize(("entry", "given"), [("3", "3"), ("", "empty"), ("[a, b]", '["a", "b"]'), ("true", "true")])
def test_an_alias_that_is_neither_a_model_string_nor_a_mapping_says_what_it_may_be(tmp_path, monkeypatch, entry,
                                                                                  given):
    """It was pydantic's "Input should be a valid dictionary or instance of ModelAlias": a class name, and not a word
    of the string form the docs show first."""
    models, err = refusal(tmp_path, monkeypatch, f"mine: {entry}\n")
    assert err.message == (f"the alias 'mine' in {models} is {given}: give a litellm model string ('provider/name') "
                           "or a mapping with a `model`") and err.field == "mine"


@pytest.mark.parametrize("api_base", ["localhost:8000", "5", "''", "ftp://gpu-node/v1", "http://", "http://h:port/v1"])
def test_an_api_base_that_is_no_servers_url_is_refused_naming_the_alias_field_and_file(tmp_path, monkeypatch,
                                                                                       api_base):
    """``api_base: localhost:8000`` passed until ``tessera models`` said "no server answers on localhost:8000
    (InvalidSchema)" and every call failed; ``api_base: 5`` was pydantic's "Input should be a valid string"."""
    models, err = refusal(tmp_path, monkeypatch, f"mine:\n  model: hosted_vllm/x\n  api_base: {api_base}\n")
    assert err.field == "mine.api_base" and err.message.startswith(
        "must be a server's URL, http:// or https:// and its host (such as http://localhost:8000/v1), not ")
    assert err.message.endswith(f" (in {models})")
    models.write_text("mine:\n  model: hosted_vllm/x\n  api_base: https://gpu-node:8000/v1\n")
    assert aliases()["mine"].api_base == "https://gpu-node:8000/v1"


@pytest.mark.parametrize("api_base", ["bob:s3cret@localhost:8000/v1", "ftp://bob:s3cret@gpu-node/v1"])
def test_a_refused_api_base_does_not_say_its_password(tmp_path, monkeypatch, api_base):
    """The refusal quoted the value back, ``user:password@`` and all."""
    models, err = refusal(tmp_path, monkeypatch, f"mine:\n  model: hosted_vllm/x\n  api_base: '{api_base}'\n")
    assert err.field == "mine.api_base" and "s3cret" not in err.message and "bob" not in err.message
    assert f"not '{api_base.split('bob:s3cret')[0]}***@" in err.message, err.message


@pytest.mark.parametrize("value", ["sk-proj-abc123secret", "my key", "", "1KEY"])
def test_an_api_key_env_that_names_no_variable_is_refused_without_its_value(tmp_path, monkeypatch, capfd, value):
    """The key itself pasted as ``api_key_env`` was taken as a variable's name: ``tessera run`` printed it ("$sk-...
    is not set"), and the service's 422 ``env_not_set`` answered it to its client."""
    models = tmp_path / "models.yaml"
    models.write_text(json.dumps({"mine": {"model": "openai/gpt-4o-mini", "api_key_env": value}}))
    done = tessera_here(monkeypatch, capfd, tmp_path, models, "run", "answer_only", "-q", "hi", "--set",
                        "answer.model=mine")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "field 'mine.api_key_env': must be the name of the environment variable that holds the key" in done.stderr
    assert f"(in {models})" in done.stderr and (not value or value not in done.stderr), done.stderr


@pytest.mark.parametrize("endpoint", ["/v1/chat/completions", "/v1/chat/completions/", "/v1/completions"])
def test_an_api_base_that_is_the_endpoint_is_refused_with_the_base_to_give(tmp_path, monkeypatch, endpoint):
    """The endpoint pasted whole from a curl line passed, ``tessera models`` said the server answers, and every call
    was a 404 at ``.../chat/completions/chat/completions``; refused as the file is read, without the password."""
    models, err = refusal(tmp_path, monkeypatch,
                          f"mine:\n  model: openai/x\n  api_base: http://me:s3cret@gpu-node:8000{endpoint}\n")
    route = endpoint.rstrip("/").removeprefix("/v1")
    assert err.field == "mine.api_base" and err.message == (
        f"must be the server's base URL, not its endpoint {route} (the call adds it): give http://gpu-node:8000/v1 "
        f"(in {models})"), err.message
    assert "s3cret" not in err.message
