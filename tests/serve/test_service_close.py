"""``Service.close`` (a replica's shutdown, through ``ModelAPI.__del__``) closes every connection of its task store
and stops its threads: before, nothing closed them, and the tests' workers, which make hundreds of services, ran out
of the descriptors ``select`` can watch."""

from __future__ import annotations

import threading
from pathlib import Path

from serve import service as service_module
from tests.open_files import open_files


def open_files_named(name: str, under: Path) -> list[str]:
    """The paths under ``under`` this process holds open whose file name starts with ``name`` (``tasks.db``,
    ``tasks.db-wal``)."""
    return [held for held in open_files(under) if Path(held).name.startswith(name)]


def test_a_closed_service_holds_no_task_store_file_and_no_thread(make_service, tmp_path):
    service = make_service(task_retention_days=30)
    service.store.task("no-such-task", "tessera")  # a read: the pool keeps its connection open
    assert open_files_named("tasks.db", tmp_path), "the store's connection holds its file while the service runs"
    assert service_module.configured()
    service.answers.pool.submit(lambda: None).result()  # an answer's thread started
    answering = [t for t in threading.enumerate() if t.name.startswith("tessera-answer")]
    assert answering

    service.close()

    assert open_files_named("tasks.db", tmp_path) == []
    assert not service_module.configured()  # the app answers 503 service_not_configured, not from a closed store
    service.pruner.thread.join(timeout=10)
    assert not service.pruner.thread.is_alive()
    for thread in answering:
        thread.join(timeout=10)
        assert not thread.is_alive()
