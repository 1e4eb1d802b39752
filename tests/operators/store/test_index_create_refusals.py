"""``Index.create`` (the Python API that ``index add``, ``ingest`` and the service reach) refuses, with an index
error naming the problem, a folder whose manifest is lost but whose shards are there (a new manifest would leave
them to be deleted), a file or a path under one, and ``~`` of no user; ``resolve_index`` refuses an empty name.
A folder with only an unfinished ingestion's staging (no shard written) is still a place for a new index."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.store import Index, IndexSettings, IndexStoreError, resolve_index
from operators.store.errors import IndexCorruptError, IndexNotFoundError

BM25 = IndexSettings(dense=False)


def _docs() -> pa.Table:
    return pa.table({"docno": ["d1", "d2"], "doc_id": ["d1", "d2"], "text": ["honey bees", "wasps"]})


def test_a_folder_whose_manifest_is_lost_is_not_made_a_new_empty_index(tmp_path):
    index = Index.create(tmp_path / "i", BM25)
    shard = index.add(_docs())
    (tmp_path / "i" / "manifest.json").unlink()
    with pytest.raises(IndexCorruptError, match=f"holds 1 shard folder\\(s\\) but no manifest.json .*{shard.id}"):
        Index.create(tmp_path / "i", BM25)
    assert not (tmp_path / "i" / "manifest.json").exists() and (tmp_path / "i" / "shards" / shard.id).is_dir()


def test_staging_alone_or_a_temporary_shard_folder_is_no_lost_index(tmp_path):
    (tmp_path / "i" / "_ingest" / "abc").mkdir(parents=True)
    (tmp_path / "i" / "_ingest" / "abc" / "abc-00000.parquet").write_bytes(b"")
    (tmp_path / "i" / "shards" / "abc-00000").mkdir(parents=True)  # written, staged, committed nowhere
    (tmp_path / "i" / "shards" / ".tmp-add-1-0123").mkdir()  # a writer that died half-way
    assert len(Index.create(tmp_path / "i", BM25)) == 0


def test_a_file_or_a_path_under_one_is_an_index_error_not_an_os_error(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "honey bees"}\n')
    with pytest.raises(IndexStoreError, match="is a file, not an index folder"):
        Index.create(corpus, BM25)
    with pytest.raises(IndexStoreError, match=f"is under the file {corpus}, not in a folder"):
        Index.create(corpus / "sub", BM25)
    with pytest.raises(IndexStoreError, match="is under the file /dev/null, not in a folder"):  # not NotADirectoryError
        Index.create(Path("/dev/null/indices/named"), BM25)


def test_an_empty_name_and_the_home_of_no_user_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    for name in ("", " "):
        with pytest.raises(IndexStoreError, match="an index name cannot be empty") as err:
            resolve_index(name)
        assert not isinstance(err.value, IndexNotFoundError)  # `index add` would take it for "create it"
    for call in (resolve_index, lambda path: Index.create(path, BM25), Index.open):
        with pytest.raises(IndexStoreError, match="~nosuchuser-tessera names no user's home folder"):
            call("~nosuchuser-tessera/x")


def test_a_stemmer_or_stopwords_language_the_libraries_lack_is_refused_in_the_settings(tmp_path):
    """``stemmer: English`` reached PyStemmer only when the first shard was written: a KeyError, after the shard's
    documents had been read and embedded. The settings name it, and the languages the libraries have pass."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="'English' is no PyStemmer language; did you mean 'english'"):
        IndexSettings(dense=False, stemmer="English")
    with pytest.raises(ValidationError, match=r"'xx' is no language bm25s has stopwords for .*names\); a list of"):
        IndexSettings(dense=False, stopwords="xx")
    with pytest.raises(ValidationError, match=r"'germn' is no language .*English names\); did you mean 'german'\? "
                                              "A list of words"):
        IndexSettings(dense=False, stopwords="germn")
    assert IndexSettings(dense=False, stopwords="German").stopwords == "german"  # English names in any case
    german = IndexSettings(dense=False, stemmer="german", stopwords="de")
    Index.create(tmp_path / "de", german).write_shard("s1", pa.table({
        "docno": ["d1"], "doc_id": ["d1"], "text": ["Die Bienen machen Honig"]}))
    assert IndexSettings(dense=False, stemmer=None, stopwords=["honey"]).stopwords == ["honey"]
    assert IndexSettings(dense=False, stemmer="en").stemmer == "en"  # PyStemmer's ISO codes too


def test_a_stopword_list_is_matched_without_case(tmp_path):
    """Tokens are lower-cased, the list was not: [Der, Und] removed nothing from a German corpus (its nouns and a
    sentence's first word are capitalised)."""
    settings = IndexSettings(dense=False, stemmer=None, stopwords=["Der", "Und", "der"])
    assert settings.stopwords == ["der", "und"]
    index = Index.create(tmp_path / "de", settings)
    index.add(pa.table({"docno": ["d1", "d2"], "doc_id": ["d1", "d2"],
                        "text": ["Der Rhein und die Mosel", "Die Donau fliesst nach Osten"]}))
    assert index.search_bm25(["der und"], k=2)[0].docnos == []  # stopwords alone: nothing to search for
    assert index.search_bm25(["Rhein"], k=2)[0].docnos == ["d1"]


def test_a_text_field_no_chunk_has_is_said_not_dropped_without_a_word(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr("operators.store.bm25._ABSENT_SAID", set())  # said once a process
    index = Index.create(tmp_path / "typo", IndexSettings(dense=False, text_fields=["title", "txt"]))
    with caplog.at_level("WARNING", logger="operators.store.bm25"):
        index.add(pa.table({"docno": ["d1"], "doc_id": ["d1"], "title": ["Rivers"], "text": ["The Rhine flows"]}))
    assert "BM25 text_fields 'txt' is no column of these chunks" in caplog.text
    assert index.search_bm25(["rhine"], k=1)[0].docnos == []  # what it warns of: only the title is indexed
