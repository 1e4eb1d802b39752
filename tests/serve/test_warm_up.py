"""A replica warms up on a daemon thread while it starts, so its first search does not import torch and load the
default index's encoder: the warm-up sets up the default search flow's steps that run in the replica, and a warm-up
that fails is logged, never raised. A real ``Service`` over a real index."""

from __future__ import annotations

import logging

import pytest

from serve.service_settings import ServiceArgs, resolve


def service(tmp_path, monkeypatch, index):
    from serve.service import Service

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=str(index), task_store=f"sqlite:///{tmp_path / 'tasks.db'}",
                       spare_task_workers=0, task_retention_days=0)
    return Service(resolve(args, environ={}), [], "tessera")


def test_a_failing_warm_up_is_logged_and_the_service_serves(tmp_path, monkeypatch, caplog):
    broken = tmp_path / "home" / "indices" / "broken"
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{}")  # an index that does not open
    with caplog.at_level(logging.WARNING, logger="tessera.serve"):
        made = service(tmp_path, monkeypatch, broken)
        made.warming.join(timeout=300)
    assert not made.warming.is_alive()
    warned = [record for record in caplog.records if "warm-up" in record.getMessage()]
    assert len(warned) == 1 and not warned[0].exc_info, [record.getMessage() for record in warned]
    assert "could not set up the default search" in warned[0].getMessage() and "broken" in warned[0].getMessage()
    assert made.store.list_tasks("local") == []  # the service itself is unaffected


def test_a_default_index_without_vectors_is_one_warning_naming_it_without_a_traceback(tmp_path, monkeypatch, caplog):
    """The default search flow (hybrid) needs vectors; a BM25-only default index is what a search naming no flow
    will be told, said once at the start, not a traceback."""
    from tests.serve.conftest import two_document_index

    news = tmp_path / "home" / "indices" / "news"
    two_document_index(news)  # BM25 only
    with caplog.at_level(logging.WARNING, logger="tessera.serve"):
        made = service(tmp_path, monkeypatch, news)
        made.warming.join(timeout=300)
    warned = [record for record in caplog.records if "warm-up" in record.getMessage()]
    assert len(warned) == 1 and not warned[0].exc_info, [record.getMessage() for record in warned]
    assert "built without vectors" in warned[0].getMessage()


def test_a_default_index_not_made_yet_is_named_in_a_warning_and_the_service_serves(tmp_path, monkeypatch, caplog):
    """The shipped config names the sample index, which only ``make demo`` makes: /healthz says ready, so the log
    says which searches fail, once, at the start."""
    missing = tmp_path / "home" / "indices" / "sample"
    with caplog.at_level(logging.WARNING, logger="tessera.serve"):
        made = service(tmp_path, monkeypatch, missing)
        made.warming.join(timeout=300)
    warned = [r.getMessage() for r in caplog.records if "holds no index" in r.getMessage()]
    # the command that makes it, which a user of an installed wheel can run too (there is no `make demo` there)
    assert len(warned) == 1 and f"tessera ingest --source FILE --index {missing})" in warned[0], warned
    assert made.store.list_tasks("local") == []


def test_a_search_of_a_default_index_not_made_is_a_503_of_the_server_and_health_names_it(tmp_path, monkeypatch):
    """It was a 422 on ``index`` ("index 'the default index' does not exist") for a request that named none, while
    /healthz said only "ok": a client was blamed for the server's setting."""
    import asyncio

    from serve.http.errors import ApiError
    from tests.serve.conftest import two_document_index
    from tests.serve.test_ops_health import healthz

    missing = tmp_path / "home" / "indices" / "sample"
    made = service(tmp_path, monkeypatch, missing)
    made.warming.join(timeout=300)
    assert asyncio.run(healthz(made))["default_index"] == "missing"
    with pytest.raises(ApiError) as err:
        made.prepare({"flow": "bm25", "query": "honey"}, "local", search=True)
    assert (err.value.status, err.value.code, err.value.param) == (503, "default_index_missing", "index")
    assert "args.service.default_index" in err.value.message and str(missing) not in err.value.message
    assert "tessera ingest --source FILE --index" in err.value.message and "make demo" not in err.value.message
    two_document_index(tmp_path / "home" / "indices" / "news")  # a request that names an index is served
    assert made.prepare({"flow": "bm25", "query": "honey", "index": "news"}, "local", search=True).spec
    two_document_index(missing)
    assert asyncio.run(healthz(made))["default_index"] == "ok"
    assert made.prepare({"flow": "bm25", "query": "honey"}, "local", search=True).spec


def test_a_default_index_private_to_a_key_is_named_in_one_warning_without_a_traceback(tmp_path, monkeypatch, caplog):
    """An upload of one key made the default index: the warm-up (as no key) is refused as other keys' searches
    will be, and the log says so in the service's words, not as a failure."""
    from serve.indices.index_owner import write_owner
    from tests.serve.conftest import two_document_index

    news = tmp_path / "home" / "indices" / "news"
    two_document_index(news)
    write_owner(news, {"owner": "alice", "shared": False, "spec": "ingest", "created": 1.0})
    with caplog.at_level(logging.WARNING, logger="tessera.serve"):
        made = service(tmp_path, monkeypatch, news)
        made.warming.join(timeout=300)
    warned = [r for r in caplog.records if "warm-up" in r.getMessage()]
    assert len(warned) == 1 and not warned[0].exc_info, [r.getMessage() for r in warned]
    assert str(news) in warned[0].getMessage() and "index_not_shared" not in warned[0].getMessage()
    assert "belongs to another key, which has not shared it" in warned[0].getMessage()


@pytest.mark.integration  # MiniLM loads in this process
def test_the_warm_up_opens_the_default_index_and_loads_its_encoder(tmp_path, monkeypatch, sample_index):
    from operators.models.repository import models
    from operators.retrieve import _index_retriever

    for name, params in models.keys():  # as in a new replica: no encoder loaded, no index open
        if name == "sentence_transformer":
            models.delete(name, params)
    _index_retriever._indices.pop(str(sample_index.resolve()), None)

    made = service(tmp_path, monkeypatch, sample_index)
    made.warming.join(timeout=600)
    assert not made.warming.is_alive()
    assert str(sample_index.resolve()) in _index_retriever._indices
    assert [name for name, _ in models.keys()].count("sentence_transformer") == 1
