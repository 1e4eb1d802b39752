"""``without_server_paths`` words a run's failure for a client: each absolute path by its last part, the home as
``$TESSERA_HOME``, and nothing else changed (URLs, the service's routes, relative paths, ratios and dates keep their
slashes)."""

from __future__ import annotations

import pytest

from serve.http.server_paths import public_metadata, without_server_paths


@pytest.mark.parametrize("text, public", [
    ("the config file at '{home}/models/m/config.json' is not valid", "the config file at 'config.json' is not valid"),
    ("model 'tessera//srv/llm/x.gguf': Failed to load model from file: /srv/llm/x.gguf",
     "model 'tessera/x.gguf': Failed to load model from file: x.gguf"),
    ("index {home} is full; see file:///srv/a/b.jsonl and ~/notes/c.txt", "index $TESSERA_HOME is full; see b.jsonl "
     "and c.txt"),
    ("GET http://127.0.0.1:8000/v1/rerank failed, https://example.com/a/b too", None),
    ("data/sample/corpus.jsonl and/or 3 rows/s on 2026/12/01", None),
    ("index 'n' does not exist (GET /v1/indices lists the indices); POST /task/run, GET /tasks or /flows/x", None),
    ("/v1x/a.json, /tasks2/b.json and {home}/flows/c.yaml", "a.json, b.json and c.yaml"),
])
def test_absolute_paths_by_their_last_part_and_the_rest_as_it_was(text, public, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "my home"))  # a space: the home is matched as a whole
    text = text.format(home=tmp_path / "my home")
    assert without_server_paths(text) == (text if public is None else public)


def test_only_degraded_reasons_of_the_metadata_are_reworded(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    metadata = {"q1": {"answer": "see /usr/share/doc", "degraded": {"step": "a", "reason": f"{tmp_path}/llm/x.gguf"}},
                "q2": {"answer": "fine"}}
    assert public_metadata(metadata) == {"q1": {"answer": "see /usr/share/doc", "degraded": {"step": "a",
                                                                                           "reason": "x.gguf"}},
                                         "q2": {"answer": "fine"}}
    assert metadata["q1"]["degraded"]["reason"] == f"{tmp_path}/llm/x.gguf"  # the run's own is left as it was


def test_a_refused_spec_names_no_server_path(make_service):
    """A 422 of a spec whose index the request named by its path (or the service set: the default index) quoted
    the folder, ``index '/srv/home/indices/notes' was built without vectors``; routes it names stay as they are."""
    import requests

    from tests.serve.conftest import api_on_localhost, two_document_index

    service = make_service()
    folder = service.indices.folder / "notes"
    two_document_index(folder)
    with api_on_localhost() as url:
        dense = {"flow": {"steps": {"d": {"op": "retrieve.dense", "params": {"k": 3}}}}, "query": "bees",
                 "index": str(folder)}
        error = requests.post(url + "/v1/search", json=dense, timeout=60).json()["error"]
        assert error["code"] == "invalid_spec" and "index 'notes' was built without vectors" in error["message"]
        assert str(folder.parent) not in error["message"], error
        bm25 = {"flow": {"steps": {"b": {"op": "retrieve.bm25", "params": {"index": str(folder) + "-gone"}}}},
                "query": "bees"}
        error = requests.post(url + "/v1/search", json=bm25, timeout=60).json()["error"]
        assert error == {"message": "step 'b', field 'steps.b.params.index': index 'notes-gone' does not exist (GET "
                         "/v1/indices lists the indices)", "type": "invalid_request_error",
                         "param": "steps.b.params.index",
                         "code": "invalid_spec"}  # not a 404 saying it was "deleted while the flow ran"
