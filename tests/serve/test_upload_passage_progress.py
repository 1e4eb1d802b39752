"""An upload's ``ingest`` step counts its passages as they are embedded (``passages_done`` of ``passages_total``), so
a large file that is one document moves: its documents said "0 of 1", then "1 of 1", and nothing between, for the
minutes its passages took. A real upload accepted by ``Service`` (real SQLite task store), run by the task's own code
(``run_ingest``, what the task's Ray actor runs) with MiniLM in this process."""

from __future__ import annotations

import copy

import pytest

from flows.ingestion import embedder
from serve.tasks import task_rows
from serve.tasks.ingest_task import run_ingest
from tests.serve.conftest import upload

pytestmark = pytest.mark.integration  # MiniLM loads in this process

#: One document of some 8 passages of the ingest spec's chunker (200 MiniLM word pieces, 32 overlapping).
LONG = " ".join(f"Sentence {n} says that the kakapo of island {n} feeds on rimu fruit at night." for n in range(150))


def test_a_one_document_upload_counts_its_passages_as_they_are_embedded(upload_service, monkeypatch):
    monkeypatch.setattr(task_rows, "PROGRESS_EVERY_S", 0.0)  # every report written, not one each half second
    monkeypatch.setattr(embedder, "EMBED_PART_SECONDS", 1e-9)  # encoder calls of EMBED_PART_ROWS passages each,
    monkeypatch.setattr(embedder, "EMBED_PART_ROWS", 2)  # two here
    task_id, job = upload(upload_service, "book", "alice", [{"id": "book", "title": "Book", "text": LONG}])
    written = []  # the ingest step's progress at each write
    update = upload_service.store.update

    def recording(task, **values):
        if "ingest" in values.get("step_progress", {}):
            written.append(copy.deepcopy(values["step_progress"]["ingest"]))
        return update(task, **values)

    monkeypatch.setattr(upload_service.store, "update", recording)
    run_ingest(upload_service.store, task_id, job)

    task = upload_service.store.task(task_id, None)
    assert task["status"] == "finished", task
    chunks = task["result"]["aggregated_data"]["chunks"]
    assert chunks > 2 * embedder.EMBED_PART_ROWS  # three encoder calls at least
    counted = [(w["passages_done"], w["passages_total"]) for w in written if "passages_total" in w]
    assert {total for _, total in counted} == {chunks}  # the upload's one shard, chunked before it is embedded
    done = [n for n, _ in counted]
    assert done == sorted(done) and done[-1] == chunks
    moving = [n for n in done if 0 < n < chunks]
    assert len(set(moving)) >= 2, done  # moved between encoder calls, while its one document was counted already
    final = task["step_progress"]["ingest"]
    assert (final["status"], final["rows_out"], final["passages_done"], final["passages_total"]) == (
        "done", 1, chunks, chunks)
