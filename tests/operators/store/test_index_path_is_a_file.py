"""An index path that is a file (a corpus given as ``--index``, or an index's manifest.json) is refused as a file,
not as a missing index whose advice would ingest into that file."""

from __future__ import annotations

import shlex
import pytest

from operators.store import Index, IndexNotFoundError


def test_a_corpus_file_opened_as_an_index_is_called_a_file_and_offered_as_a_source(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "honey bees"}\n')
    with pytest.raises(IndexNotFoundError) as err:
        Index.open(corpus)
    assert f"{corpus} is a file, not an index folder" in err.value.message
    assert f"tessera ingest --source {shlex.quote(str(corpus))} --index NAME" in err.value.message
    assert f"--index {corpus}" not in err.value.message  # never advice to ingest into the corpus file


def test_an_indexs_manifest_opened_as_the_index_names_its_folder(tmp_path):
    manifest = tmp_path / "idx" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    with pytest.raises(IndexNotFoundError, match=f"give its folder {tmp_path / 'idx'}$"):
        Index.open(manifest)
