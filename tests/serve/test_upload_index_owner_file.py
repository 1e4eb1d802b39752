"""An upload into a new index over HTTP writes the index's ``owner.json`` (serve/indices/index_owner.py) before its
ingestion starts; the ingestion must take that folder as the index's own, not as a folder of someone else's files.
Refusing folders of other files (57415b8) failed every upload into a new index ("soak-new is a folder of other
files, not an index (1 entry: owner.json)"), seen by benchmarks/serve_soak.py."""

from __future__ import annotations

import json
import time

from operators.store.layout import foreign_entries


def test_a_folder_with_the_services_owner_file_takes_a_new_index(tmp_path, monkeypatch):
    from flows.api import ingest
    from operators.testing import sample_documents
    from serve.indices.index_owner import OWNER_FILE, write_owner

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d["docno"], "title": d["title"], "text": d["text"]}) + "\n"
                              for d in sample_documents(3).to_pylist()), encoding="utf-8")
    folder = tmp_path / "home" / "indices" / "news"
    write_owner(folder, {"owner": "alice", "shared": False, "spec": "ingest", "created": time.time()})
    assert foreign_entries(folder) == []
    assert len(ingest(corpus, folder, settings={"dense": False}, progress=False)) == 3
    assert sorted(p.name for p in folder.iterdir() if p.name in (OWNER_FILE, "manifest.json")) == \
        ["manifest.json", OWNER_FILE]
