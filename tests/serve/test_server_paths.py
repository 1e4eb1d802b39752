"""``without_server_paths`` words a run's failure for a client: each absolute path by its last part, the home as
``$TESSERA_HOME``, and nothing else changed (URLs, relative paths, ratios and dates keep their slashes)."""

from __future__ import annotations

import pytest

from serve.server_paths import public_metadata, without_server_paths


@pytest.mark.parametrize("text, public", [
    ("the config file at '{home}/models/m/config.json' is not valid", "the config file at 'config.json' is not valid"),
    ("model 'tessera//srv/llm/x.gguf': Failed to load model from file: /srv/llm/x.gguf",
     "model 'tessera/x.gguf': Failed to load model from file: x.gguf"),
    ("index {home} is full; see file:///srv/a/b.jsonl and ~/notes/c.txt", "index $TESSERA_HOME is full; see b.jsonl "
     "and c.txt"),
    ("GET http://127.0.0.1:8000/v1/rerank failed, https://example.com/a/b too", None),
    ("data/sample/corpus.jsonl and/or 3 rows/s on 2026/12/01", None),
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
