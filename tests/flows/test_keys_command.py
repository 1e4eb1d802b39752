"""``tessera keys new | id``: the keys it makes and the ids it tells are the ones the service itself accepts and gives,
checked with the service's own settings (``serve.service_settings``) and bearer check
(``serve.security.auth.tenant_of``), and ``tessera serve``'s own hashing of ``$TESSERA_API_KEYS``
(``carry_environment``). In-process, no Ray."""

from __future__ import annotations

import json

import pytest
import yaml

from operators.api_keys import key_hash
from tests.flows.test_cli_scripting import one_error, tessera  # noqa: F401 - fixture

KEY = "k" * 12 + "-a_long_one"  # 23 characters, a '-' and a '_' as a URL-safe key has


def service_keys(tmp_path, entries: list[dict] | None = None, environ: dict | None = None) -> dict:
    """What the service's ingress gets from a config's ``api_keys`` and the environment: hash -> id, the admins."""
    from serve.service_settings import ServiceArgs, resolve

    resolved = resolve(ServiceArgs(default_index=None, api_keys=entries or []), environ or {})
    return {"keys": resolved["keys"], "admins": resolved["admins"]}


def printed(out: str, label: str) -> str:
    [value] = [line.split()[1] for line in out.splitlines() if line.startswith(label + " ")]
    return value


@pytest.mark.parametrize("key_id", ["alice", "2024"])  # 2024: YAML would read it as a number unless quoted
def test_a_new_key_is_let_in_by_the_service_under_its_id(tmp_path, tessera, key_id):  # noqa: F811
    from serve.security.auth import tenant_of

    status, out, err = tessera("keys", "new", "--id", key_id, home=tmp_path)
    assert status == 0 and err == "", err
    key, digest = printed(out, "key"), printed(out, "sha256")
    assert digest == key_hash(key) and len(key) >= 40 and not key.startswith("-")
    assert "shown only this time" in out
    [line] = [line.strip()[2:] for line in out.splitlines() if line.strip().startswith("- {")]
    entry = yaml.safe_load(line)  # the line as pasted into a serve config
    assert entry == {"id": key_id, "sha256": digest}
    served = service_keys(tmp_path, [entry])
    assert tenant_of(f"Bearer {key}", served["keys"]) == key_id
    assert tenant_of(f"Bearer {key}x", served["keys"]) is None and served["admins"] == []


def test_new_keys_as_json_differ_and_an_admin_key_is_an_admin(tmp_path, tessera):  # noqa: F811
    from serve.security.auth import tenant_of

    made = []
    for key_id, admin in (("ops", ["--admin"]), ("bob.smith_2", [])):
        status, out, _ = tessera("keys", "new", "--id", key_id, *admin, "--json", home=tmp_path)
        assert status == 0
        made.append(json.loads(out))  # the whole of stdout is one document
    assert [sorted(m) for m in made] == [["admin", "id", "key", "sha256"]] * 2
    assert [m["admin"] for m in made] == [True, False]
    assert made[0]["key"] != made[1]["key"] and made[0]["sha256"] != made[1]["sha256"]
    served = service_keys(tmp_path, [{"id": m["id"], "sha256": m["sha256"], "admin": m["admin"]} for m in made])
    assert all(m["sha256"] == key_hash(m["key"]) for m in made)
    assert [tenant_of(f"Bearer {m['key']}", served["keys"]) for m in made] == ["ops", "bob.smith_2"]
    assert served["admins"] == ["ops"]


@pytest.mark.parametrize("key_id", ["-leading-dash", "a" * 65])
def test_an_id_the_service_refuses_is_refused_naming_id(tmp_path, tessera, key_id):  # noqa: F811
    from pydantic import ValidationError

    from serve.service_settings import ApiKey

    with pytest.raises(ValidationError):  # the service's own rule refuses it too
        ApiKey(id=key_id, sha256=key_hash(KEY))
    status, out, err = tessera("keys", "new", f"--id={key_id}", home=tmp_path)
    assert status == 2 and out == ""  # no key printed for an entry that would not work
    one_error(err, "field '--id'", "no key id the service takes")


def test_new_without_an_id_is_a_usage_error(tmp_path, tessera, capsys):  # noqa: F811
    with pytest.raises(SystemExit) as exited:
        tessera("keys", "new", home=tmp_path)
    assert exited.value.code == 2 and "--id" in capsys.readouterr().err


def test_id_is_the_id_the_service_and_tessera_serve_give_an_environment_key(tmp_path, tessera):  # noqa: F811
    from flows.commands.serve import carry_environment
    from serve.security.auth import tenant_of

    status, out, _ = tessera("keys", "id", KEY, home=tmp_path)
    assert status == 0
    key_id, digest = printed(out, "id"), printed(out, "sha256")
    assert digest == key_hash(KEY) and key_id == f"env-{digest[:8]}"
    served = service_keys(tmp_path, environ={"TESSERA_API_KEYS": f"{KEY},{'z' * 20}"})
    assert tenant_of(f"Bearer {KEY}", served["keys"]) == key_id
    config = {"applications": [{"name": "app", "args": {"service": {}}}]}
    carry_environment(config, {"TESSERA_API_KEYS": KEY})
    assert config["applications"][0]["args"]["service"]["api_keys"] == [{"id": key_id, "sha256": digest}]
    [line] = [line.strip()[2:] for line in out.splitlines() if line.strip().startswith("- {")]
    assert yaml.safe_load(line) == {"id": key_id, "sha256": digest}  # the same key moved into the config


def test_id_reads_the_key_from_stdin_as_the_environment_holds_it(tmp_path, tessera):  # noqa: F811
    status, out, _ = tessera("keys", "id", "--json", home=tmp_path, stdin=f"  {KEY}\n".encode())
    assert status == 0 and json.loads(out) == {"id": f"env-{key_hash(KEY)[:8]}", "sha256": key_hash(KEY)}


@pytest.mark.parametrize("args, stdin, needle", [
    ((), b"", "no key given"),
    ((), b" \n", "no key given"),
    (("",), None, "no key given"),
    (("short",), None, "under 16"),
    (("clé-du-service-2026-long",), None, "other than printable ASCII"),
    ((f"{KEY},{KEY}x",), None, "comma-separated"),
    ((), f"{KEY}\n{KEY}x\n".encode(), "one key"),
])
def test_id_refuses_what_the_service_would_not_take_as_a_key(tmp_path, tessera, args, stdin, needle):  # noqa: F811
    status, out, err = tessera("keys", "id", *args, home=tmp_path, stdin=stdin)
    assert status == 2 and out == ""
    one_error(err, "field 'KEY'", needle)


def test_the_id_of_the_keyless_caller_is_refused_naming_it(tmp_path, tessera):  # noqa: F811
    """``local`` is the tenant of every request to a service without keys: a key of that id would see the tasks and
    indices made without a key and the command line's shared saved flows."""
    from pydantic import ValidationError

    from serve.service_settings import ApiKey

    with pytest.raises(ValidationError, match="key id 'local' is reserved"):  # the service refuses it too
        ApiKey(id="local", sha256=key_hash(KEY))
    status, out, err = tessera("keys", "new", "--id", "local", home=tmp_path)
    assert status == 2 and out == ""  # no key printed for an entry the service would refuse
    one_error(err, "field '--id'", "key id 'local' is reserved", "another id")
    assert tessera("keys", "new", "--id", "local2", home=tmp_path)[0] == 0



def test_a_new_key_outside_a_clone_says_how_to_get_a_config_of_ones_own(tmp_path, monkeypatch, capsys):
    """A user of an installed wheel has no serve/config.yaml in his folder (the packaged one is inside site-packages,
    which a reinstall replaces): "add under ... in the serve config" named none he could edit. Now the command says
    how to write one that tessera serve runs; in a folder with one, the line goes there and nothing more is said."""
    from flows.commands import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    assert main(["keys", "new", "--id", "alice"]) == 0
    assert ("no ./serve/config.yaml here: tessera serve --print-config > serve.yaml writes the one tessera serve "
            "runs; add the line there, then tessera serve --config serve.yaml") in capsys.readouterr().out
    (tmp_path / "serve").mkdir()
    (tmp_path / "serve" / "config.yaml").write_text("applications: []\n")
    assert main(["keys", "new", "--id", "bob"]) == 0
    assert "no ./serve/config.yaml here" not in capsys.readouterr().out


@pytest.mark.process  # tessera serve checks a config's app args in a Python process of its own
def test_the_config_the_hint_writes_runs_the_new_key(tmp_path, monkeypatch, capsys):
    """The hint's two commands, as said: the printed config, the entry added, is the one tessera serve --config runs,
    with the key in it."""
    from flows.commands import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    assert main(["serve", "--print-config"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    config["applications"][0]["args"]["service"]["api_keys"] = [{"id": "alice", "sha256": key_hash(KEY)}]
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(config))
    assert main(["serve", "--config", "serve.yaml", "--print-config"]) == 0
    served = yaml.safe_load(capsys.readouterr().out)["applications"][0]["args"]["service"]["api_keys"]
    assert served == [{"id": "alice", "sha256": key_hash(KEY)}]
