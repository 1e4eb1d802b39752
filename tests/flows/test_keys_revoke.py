"""``tessera keys revoke | unrevoke | revoked``: the command finds the keys and the task store as ``tessera serve``
does (the config's ``api_keys`` and ``task_store``, ``$TESSERA_API_KEYS`` with its ``env-`` ids) and writes the
revocation the service reads (``flows.key_revocations``) into a real SQLite store; a bad id, hash or store is one
line. In-process (``flows.commands.main``); the end-to-end check against a running app is
``tests/serve/test_key_revocation.py``."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
import yaml

from flows.key_revocations import revoked_rows
from operators.api_keys import key_hash
from tests.flows.test_cli_scripting import one_error, tessera  # noqa: F401 - fixture

ALICE, OPS, OPS2, RAW = "alice-key-0123456789", "ops-key-0123456789", "ops2-key-0123456789", "env-raw-key-0123456789"


def write_config(tmp_path, admins: tuple[str, ...] = (OPS,), store: bool = True):
    """A Serve config with the keys alice and the admins ``ops``, ``ops2``...; its store made as the service makes
    it (``TaskStore``), unless ``store`` is False."""
    from serve.tasks.taskstore import TaskStore

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    keys = [{"id": "alice", "sha256": key_hash(ALICE)}]
    keys += [{"id": f"ops{i or ''}", "sha256": key_hash(raw), "admin": True} for i, raw in enumerate(admins)]
    config = tmp_path / "serve.yaml"
    config.write_text(yaml.safe_dump({"applications": [{"name": "tessera", "import_path": "serve.app:build_app",
                                                        "args": {"models": [], "service": {"task_store": url,
                                                                                           "api_keys": keys}}}]}))
    if store:
        TaskStore(url).engine.dispose()
    return str(config), url


def rows(url: str) -> list[dict]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = revoked_rows(conn)
    engine.dispose()
    return found


def test_revoke_by_id_writes_the_keys_hash_and_unrevoke_removes_it(tmp_path, tessera):  # noqa: F811
    config, url = write_config(tmp_path)
    status, out, err = tessera("keys", "revoke", "--id", "alice", "--config", config, home=tmp_path)
    assert status == 0 and err == "", err
    assert "revoked key 'alice'" in out and "within 5 s" in out and "tessera keys unrevoke --id alice" in out
    [row] = rows(url)
    assert (row["sha256"], row["key_id"]) == (key_hash(ALICE), "alice") and row["by"].startswith("tessera keys revoke")
    status, out, _ = tessera("keys", "revoke", "--sha256", key_hash(ALICE).upper(), "--config", config, home=tmp_path)
    assert status == 0 and "was revoked already" in out and len(rows(url)) == 1
    status, out, _ = tessera("keys", "revoked", "--config", config, "--json", home=tmp_path)
    assert [(r["id"], r["sha256"]) for r in json.loads(out)] == [("alice", key_hash(ALICE))]
    status, out, _ = tessera("keys", "unrevoke", "--id", "alice", "--config", config, "--json", home=tmp_path)
    assert status == 0 and json.loads(out)["changed"] is True and rows(url) == []
    status, out, _ = tessera("keys", "unrevoke", "--id", "alice", "--config", config, home=tmp_path)
    assert status == 0 and "was not revoked" in out


def test_an_environment_key_is_revoked_by_its_env_id(tmp_path, tessera, monkeypatch):  # noqa: F811
    config, url = write_config(tmp_path)
    monkeypatch.setenv("TESSERA_API_KEYS", RAW)
    status, out, _ = tessera("keys", "id", RAW, "--json", home=tmp_path)
    env_id = json.loads(out)["id"]
    status, out, err = tessera("keys", "revoke", "--id", env_id, "--config", config, home=tmp_path)
    assert status == 0, err
    assert [(r["key_id"], r["sha256"]) for r in rows(url)] == [(env_id, key_hash(RAW))]


@pytest.mark.parametrize("args, field, words", [
    (["--id", "nobody"], "--id", "no key has the id 'nobody' in "),
    (["--sha256", "a" * 64], "--sha256", f"no key has the sha256 {'a' * 64} in "),
    (["--sha256", "xyz"], "--sha256", "'xyz' is no SHA-256: 64 hex digits"),
])
def test_a_key_the_config_lacks_is_one_line_naming_the_ids(tmp_path, tessera, args, field, words):  # noqa: F811
    config, url = write_config(tmp_path)
    status, _, err = tessera("keys", "revoke", *args, "--config", config, home=tmp_path)
    line = one_error(err, f"field '{field}'", words)
    assert status == 2 and ("(their ids: alice, ops)" in line or "xyz" in line) and rows(url) == []


def test_a_store_no_service_made_is_refused_not_made(tmp_path, tessera):  # noqa: F811
    config, _ = write_config(tmp_path, store=False)
    status, _, err = tessera("keys", "revoke", "--id", "alice", "--config", config, home=tmp_path)
    one_error(err, f"no task store at {tmp_path / 'tasks.db'}", "--config")
    assert status == 2 and not (tmp_path / "tasks.db").exists()


def test_a_store_made_before_revocations_gets_the_table_and_keeps_its_tasks(tmp_path, tessera):  # noqa: F811
    from serve.tasks.taskstore import TaskStore

    config, url = write_config(tmp_path)
    old = TaskStore(url)
    task_id = old.create_task("alice", "hybrid", {}, [{"qid": "1", "query": "q"}], ["a"])
    with old.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE revoked_keys")  # as a store of an earlier version
    old.engine.dispose()
    status, _, err = tessera("keys", "revoke", "--id", "alice", "--config", config, home=tmp_path)
    assert status == 0, err
    assert [r["key_id"] for r in rows(url)] == ["alice"]
    assert TaskStore(url).task(task_id, "alice")["flow"] == "hybrid"


def test_revoking_the_last_admin_key_is_done_and_said(tmp_path, tessera):  # noqa: F811
    """A leaked admin key must go even when it is the last: revoked, with a note that no admin key is left."""
    config, url = write_config(tmp_path, admins=(OPS, OPS2))
    status, _, err = tessera("keys", "revoke", "--id", "ops", "--config", config, home=tmp_path)
    assert status == 0 and err == ""  # ops1 is left
    status, _, err = tessera("keys", "revoke", "--id", "ops1", "--config", config, home=tmp_path)
    assert status == 0 and "no admin key of" in err and "left unrevoked" in err
    assert sorted(r["key_id"] for r in rows(url)) == ["ops", "ops1"]


def test_a_revoked_key_taken_out_of_the_config_is_unrevoked_by_the_id_its_row_keeps(tmp_path, tessera):  # noqa: F811
    config, url = write_config(tmp_path)
    assert tessera("keys", "revoke", "--id", "alice", "--config", config, home=tmp_path)[0] == 0
    data = yaml.safe_load(open(config))
    data["applications"][0]["args"]["service"]["api_keys"].pop(0)  # alice's entry removed from the config
    open(config, "w").write(yaml.safe_dump(data))
    status, _, err = tessera("keys", "revoke", "--id", "alice", "--config", config, home=tmp_path)
    assert status == 2 and "no key has the id 'alice'" in err
    status, out, err = tessera("keys", "unrevoke", "--id", "alice", "--config", config, home=tmp_path)
    assert status == 0 and "let in again" in out and rows(url) == [], err
    status, _, err = tessera("keys", "unrevoke", "--id", "alice", "--config", config, home=tmp_path)
    assert status == 2 and "no key has the id 'alice'" in err  # nothing left to find it by
