"""The service's settings and the exposure rule, without Ray: key hashes, the environment's keys, the bearer
check, loopback detection."""

from __future__ import annotations

import hashlib

import pytest

from serve.security.auth import check_exposure, is_loopback, tenant_of
from serve.service_settings import ServiceArgs, key_hash, resolve


def test_keys_come_hashed_from_config_and_raw_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    args = ServiceArgs(api_keys=[{"id": "alice", "sha256": key_hash("alice-secret")}], default_index="sample")
    resolved = resolve(args, {"TESSERA_API_KEYS": " bob-secret , "})
    bob = hashlib.sha256(b"bob-secret").hexdigest()
    assert resolved["keys"] == {key_hash("alice-secret"): "alice", bob: f"env-{bob[:8]}"}
    assert "alice-secret" not in repr(resolved) and "bob-secret" not in repr(resolved)
    assert resolved["task_store"] == f"sqlite:///{(tmp_path / 'tasks.db').resolve()}"
    assert resolved["default_index"] == str((tmp_path / "indices" / "sample").resolve())


def test_two_ids_with_one_key_are_refused_naming_them():
    """The same sha256 under two ids would map the key to the last id only: alice's key acting as the admin ops,
    her own tasks and indices out of her sight."""
    from pydantic import ValidationError

    digest = key_hash("alice-secret")
    with pytest.raises(ValidationError, match=r"key ids \['alice', 'ops'\] have the same sha256"):
        ServiceArgs(api_keys=[{"id": "alice", "sha256": digest}, {"id": "ops", "sha256": digest, "admin": True}])
    ServiceArgs(api_keys=[{"id": "alice", "sha256": digest}, {"id": "ops", "sha256": key_hash("ops-secret")}])


@pytest.mark.parametrize("service, field, words", [
    ({"api_keys": [{"id": "ops", "sha256": "a" * 64, "admin": "yes"}]}, "service.api_keys.0.admin",
     "must be true or false (got 'yes'); a setting takes YAML's own true or false: write it without quotes "
     "(key 'ops')"),
    ({"api_keys": [{"id": "ops", "sha256": "a" * 64, "admin": 1}]}, "service.api_keys.0.admin",
     "must be true or false (got 1) (key 'ops')"),
    ({"allow_public_without_keys": "no"}, "service.allow_public_without_keys", "must be true or false (got 'no')"),
    ({"allow_public_without_keys": "off"}, "service.allow_public_without_keys", "must be true or false (got 'off')"),
    ({"limits": {"max_tasks": "8"}}, "service.limits.max_tasks", "must be a whole number (got '8'); a setting takes "
     "YAML's own number"),
    ({"compact_after_shards": True}, "service.compact_after_shards", "must be a whole number (got true)"),
    ({"task_num_cpus": "1"}, "service.task_num_cpus", "must be a number (got '1')"),
])
def test_a_setting_takes_yaml_booleans_and_numbers_only(service, field, words):
    """Pydantic's lax mode read ``admin: "yes"`` (quoted: the text) as true, an admin key its author may not have
    meant, and ``"no"`` or ``1`` as booleans, ``true`` as the number 1: each is refused at the start, naming it."""
    from serve.settings import ServeConfigError, parse_args

    with pytest.raises(ServeConfigError) as err:
        parse_args({"models": [], "service": service})
    assert err.value.field == field and err.value.message.startswith(words), err.value.message


def test_the_bearer_header_maps_to_the_key_id():
    keys = {key_hash("alice-secret"): "alice"}
    assert tenant_of("Bearer alice-secret", keys) == "alice"
    assert tenant_of("bearer alice-secret ", keys) == "alice"
    for header in (None, "", "Bearer", "Bearer alice", "Basic alice-secret", "alice-secret"):
        assert tenant_of(header, keys) is None


@pytest.mark.parametrize("host,loopback", [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True),
                                           ("localhost", True), ("0.0.0.0", False), ("::", False),
                                           ("192.168.1.4", False), ("example.org", False), ("", False)])
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


def test_a_public_host_needs_keys():
    check_exposure("127.0.0.1", has_keys=False, allow_public_without_keys=False)
    check_exposure("0.0.0.0", has_keys=True, allow_public_without_keys=False)
    with pytest.raises(RuntimeError, match="without API keys"):
        check_exposure("0.0.0.0", has_keys=False, allow_public_without_keys=False)


