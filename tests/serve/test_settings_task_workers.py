"""The settings of a replica's task workers (``args.service``: ``spare_task_workers``, ``max_idle_task_workers``,
``idle_task_worker_retire_s``): a bad value stops the app's build with the field it names, as ``serve run`` reports
it, and a good one reaches the replica's pool (``serve.tasks.spare.SpareWorkers``). Without Ray: with
``spare_task_workers: 0`` the pool starts no worker."""

from __future__ import annotations

import pytest

from serve.app import ServeConfigError, build_app
from serve.service import Service
from serve.service_settings import IDLE_TASK_WORKER_RETIRE_S, MAX_IDLE_TASK_WORKERS, ServiceArgs, resolve


@pytest.mark.parametrize("service, field, said", [
    ({"max_idle_task_workers": 0}, "service.max_idle_task_workers", "greater than or equal to 1"),
    ({"max_idle_task_workers": "many"}, "service.max_idle_task_workers", "must be a whole number (got 'many')"),
    ({"spare_task_workers": 4, "max_idle_task_workers": 2}, "service.max_idle_task_workers",
     "2 is below spare_task_workers (4)"),
    ({"idle_task_worker_retire_s": 0}, "service.idle_task_worker_retire_s", "greater than 0"),
    ({"idle_task_worker_retire_s": 1e9}, "service.idle_task_worker_retire_s", "less than or equal to 86400"),
    ({"spare_task_workers": 9}, "service.spare_task_workers", "less than or equal to 8"),
    ({"idle_worker_retire_s": 30}, "service.idle_worker_retire_s", "unknown field"),
])
def test_a_bad_task_worker_setting_stops_the_build_naming_the_field(service, field, said, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    with pytest.raises(ServeConfigError) as err:
        build_app({"models": [], "service": {"default_index": None, **service}})
    assert err.value.field == field and said in str(err.value), err.value


def pool_of(tmp_path, monkeypatch, **settings):
    """The spare workers of a replica's ``Service`` built from ``args.service`` with ``settings``."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs.model_validate({"default_index": None, "task_store": f"sqlite:///{tmp_path / 'tasks.db'}",
                                       "task_retention_days": 0, "spare_task_workers": 0, **settings})
    return Service(resolve(args, environ={}), [], "tessera").spares


def test_the_settings_reach_the_replicas_pool(tmp_path, monkeypatch):
    pool = pool_of(tmp_path, monkeypatch, max_idle_task_workers=3, idle_task_worker_retire_s=7.5)
    assert (pool.keep_at_most, pool.idle_s) == (3, 7.5)
    assert pool.waiting() == [] and pool.replica is None  # no spares, no Ray


def test_the_defaults_are_the_pools_as_before(tmp_path, monkeypatch):
    pool = pool_of(tmp_path, monkeypatch)
    assert (pool.keep_at_most, pool.idle_s) == (MAX_IDLE_TASK_WORKERS, IDLE_TASK_WORKER_RETIRE_S) == (16, 60.0)


def test_a_config_without_the_settings_gets_the_models_defaults(tmp_path, monkeypatch):
    """A config ``resolve`` did not make (a test's, a benchmark's, one from before these settings) lacks them: the
    service takes ``ServiceArgs``' defaults, declared there only."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", task_retention_days=0,
                       spare_task_workers=0, max_idle_task_workers=3, idle_task_worker_retire_s=7.5,
                       compact_after_shards=5)
    config = resolve(args, environ={})
    for name in ("max_idle_task_workers", "idle_task_worker_retire_s", "compact_after_shards"):
        del config[name]
    service = Service(config, [], "tessera")
    assert (service.spares.keep_at_most, service.spares.idle_s) == (16, 60.0)
    assert service.compact_after_shards == service.indices.compact_after_shards == ServiceArgs().compact_after_shards
    assert service.compact_after_shards == 32
