"""Documents a notebook holds (a list of dicts, a pandas DataFrame, a pyarrow Table) ingested into an index, and an
``Index`` changed in place from Python (``add``, ``update``, ``delete``). ``ingest([...])`` was refused ("source
must be a file, a glob or a folder") and ``index.add`` was an ``AttributeError``: the store's own ``add`` wants
chunks with their vectors. BM25 only, so nothing is embedded."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from flows.ingestion.errors import IngestError
from operators.store.errors import CommitError

DOCS = [{"id": "d1", "title": "Bees", "text": "Honey bees make honey from flower nectar.", "year": 2001},
        {"id": "d2", "title": "Cathedrals", "text": "Gothic cathedrals have pointed arches.", "year": 1999}]
BM25 = {"settings": {"dense": False}, "progress": False}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.mark.parametrize("given", [lambda: DOCS, lambda: pd.DataFrame(DOCS), lambda: pa.Table.from_pylist(DOCS),
                                   lambda: pd.DataFrame(DOCS).rename(columns={"id": "_id"}).set_index("_id")],
                         ids=["list", "dataframe", "table", "dataframe-indexed-by-id"])
def test_documents_in_memory_are_ingested_and_again_find_their_shards_done(home, given):
    from flows.api import ingest

    index = ingest(given(), home / "idx", **BM25)
    assert len(index) == 2 and index.report.docs == 2
    hit = index.search("honey bees", k=1, method="bm25").to_pylist()[0]
    assert (hit["docno"], hit["title"], hit["year"]) == ("d1#0", "Bees", 2001)  # other fields are metadata
    again = ingest(given(), home / "idx", **BM25)
    assert again.report.shards_skipped == 1 and again.report.docs == 0 and len(again) == 2


@pytest.mark.parametrize("given, said", [
    ([1, 2], "source is a list of documents, each a dict such as {'_id': 'd1', 'title': '...', 'text': '...'}; "
             "item 1 of 2 is int 1"),
    ([], "source holds no documents"),
    ([{"id": "a", "text": "x", "year": 1}, {"id": "b", "text": "y", "year": "old"}],
     "the documents' fields cannot be written as columns"),
    ([{"id": "a", "body": "x"}], "the documents have no field 'text' (fields: id, body): name the one that holds the "
                                 "text with fields={'text_field': NAME}"),
])
def test_documents_that_cannot_be_ingested_are_refused_naming_source_before_anything_is_made(home, given, said):
    from flows.api import ingest

    with pytest.raises(IngestError) as err:
        ingest(given, home / "idx", **BM25)
    assert err.value.field == "source" and said in err.value.message
    assert not (home / "idx").exists()


def test_a_field_named_as_the_text_is_read_as_it_is_from_a_file(home):
    from flows.api import ingest

    index = ingest([{"id": "a", "body": "Owls hunt at night."}], home / "idx", fields={"text_field": "body"}, **BM25)
    assert index.search("owls", k=1, method="bm25").column("text").to_pylist() == ["Owls hunt at night."]


def test_an_index_adds_updates_and_deletes_documents_in_place(home):
    from flows.api import ingest

    index = ingest(DOCS, home / "idx", **BM25)
    report = index.add([{"id": "d3", "title": "Owls", "text": "Owls hunt at night."}], progress=False)
    assert report.docs == 1 and len(index) == 3
    assert index.search("owls", k=1, method="bm25").column("docno").to_pylist() == ["d3#0"]

    with pytest.raises(CommitError) as err:  # an id the index holds: update replaces it
        index.add([{"id": "d3", "text": "Owls again."}], progress=False)
    assert err.value.field == "doc_id" and "['d3']" in err.value.message
    assert err.value.message.endswith("replace the index's copies: index.update(documents)")

    report = index.update(pd.DataFrame([{"id": "d3", "text": "Barn owls nest in barns."},
                                        {"id": "d4", "text": "Rivers flow to the sea."}]), progress=False)
    assert report.docs == 2 and len(index) == 4
    assert index.search("barn owls", k=1, method="bm25").column("text").to_pylist() == ["Barn owls nest in barns."]

    assert index.delete(["d1", "d4"]) == 2 and len(index) == 2
    assert "d1#0" not in index.search("honey bees", k=5, method="bm25").column("docno").to_pylist()


@pytest.mark.parametrize("doc_ids, said", [
    (["d1", "nope"], "holds no document 'nope', so nothing was deleted"),
    (["d1#0"], "holds no document 'd1#0', so nothing was deleted (a passage's docno is DOC_ID#N: delete takes the "
               "DOC_ID: 'd1' for 'd1#0')"),
    ("d1", "doc_ids is a list of ids, not one text ('d1'): give ['d1']"),
    (5, "doc_ids is a list of document ids; got int 5"),
])
def test_a_delete_of_ids_the_index_lacks_deletes_nothing_and_names_them(home, doc_ids, said):
    from flows.api import ingest

    index = ingest(DOCS, home / "idx", **BM25)
    with pytest.raises(CommitError) as err:
        index.delete(doc_ids)
    assert err.value.field == "doc_ids" and said in err.value.message
    assert len(index) == 2


@pytest.mark.parametrize("name, said", [
    ("compact", "flows.api.Index has no 'compact'; the index's store has it: index.store.compact "
                "(operators.store.Index"),
    ("upsert", "flows.api.Index has no 'upsert'; use index.update(documents), which replaces the documents with their "
               "ids"),
    ("remove", "flows.api.Index has no 'remove'; use index.delete(doc_ids)"),
    ("serch", "flows.api.Index has no 'serch'; did you mean 'search'? (it has: add, delete, open, path, report, "
              "search, store, update; index.store is operators.store.Index)"),
])
def test_an_attribute_the_index_lacks_says_where_it_is_or_what_was_meant(home, name, said):
    """``index.compact()`` (the store's, in docs/indices.md) or ``index.upsert`` was a bare ``AttributeError``."""
    from flows.api import TesseraError, ingest

    index = ingest(DOCS, home / "idx", **BM25)
    with pytest.raises(AttributeError) as err:
        getattr(index, name)
    assert isinstance(err.value, TesseraError) and str(err.value).startswith(said)
    assert not hasattr(index, name) and hasattr(index, "search")


def test_warnings_about_documents_in_memory_name_them_not_a_temporary_file(home, caplog):
    """A document with no text is skipped and a field named as a column the ingest writes (``score``) left out, each
    with a warning that named ``/tmp/tessera-documents-.../documents.parquet``, a file the caller never saw."""
    import logging

    from flows.api import ingest

    with caplog.at_level(logging.WARNING):
        index = ingest([{"id": "a", "text": "", "score": 1.0}, {"id": "b", "text": "Owls hunt.", "score": 2.0}],
                       home / "idx", **BM25)
    assert len(index) == 1
    said = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("the documents given: field(s) score are left out") for m in said), said
    assert any(m.endswith("skipped 1 document(s) with an empty text in the documents given") for m in said), said
    assert not any("tessera-documents-" in m for m in said)


def test_chunk_true_is_the_specs_chunk_step_as_none_is(home):
    """``ingest(..., chunk=True)`` was ``TypeError: 'bool' object is not iterable`` from inside the plan."""
    from flows.api import ingest

    index = ingest([{"id": "a", "text": "Owls hunt at night. " * 300}], home / "idx", chunk=True, **BM25)
    assert index.report.docs == 1 and len(index) > 1  # cut into passages of 200 word pieces, as by default


@pytest.mark.parametrize("fields, said", [({"text": "body"}, "fields: 'text' is none of id_field, text_field, "
                                                             "title_field"),
                                          (["body"], "fields must be a dict such as {'text_field': 'body'}")])
def test_fields_of_another_form_with_documents_are_refused_as_with_a_file(home, fields, said):
    """The documents' own check said "the documents have no field 'text' ... fields={'text_field': NAME}" to a
    caller who had given fields, in another form: ingest names the keys it takes, as it does for a file."""
    from flows.api import ingest

    with pytest.raises(IngestError) as err:
        ingest([{"id": "a", "body": "Owls hunt."}], home / "idx", fields=fields, **BM25)
    assert err.value.field == "fields" and said in err.value.message


def test_documents_added_deleted_and_added_again_come_back_without_a_note_of_a_temporary_file(home, caplog):
    """``index.add(docs)`` after ``index.delete`` of them found their staged shards done ("nothing to do") and left
    them deleted; ``index.update`` back to content given before logged that "the source ... (last read from
    /tmp/tessera-documents-...)" was ingested again."""
    import logging

    from flows.api import ingest

    index = ingest(DOCS, home / "idx", **BM25)
    assert index.delete(["d1", "d2"]) == 2 and len(index) == 0
    assert index.add(DOCS, progress=False).docs == 2 and len(index) == 2
    with pytest.raises(CommitError, match=r"document\(s\) \['d1', 'd2'\] \(2 in all\) are already live in .*; nothing "
                                          r"was embedded or written; give the documents other ids"):
        index.add(DOCS, progress=False)
    index.update([{"id": "d1", "text": "Barn owls nest in barns."}], progress=False)
    with caplog.at_level(logging.INFO):
        index.update([DOCS[0]], progress=False)  # back to the text given first
    assert index.store.documents(["d1#0"]).column("text").to_pylist() == [DOCS[0]["text"]]
    assert not any("tessera-documents-" in record.getMessage() for record in caplog.records)


def test_a_generator_of_documents_is_ingested_and_another_type_refused_naming_documents_too(home):
    """A generator of dicts was refused as "source must be a file, a glob or a folder ...; got generator", and so
    was a number, in words that named no documents, which ingest takes too."""
    from flows.api import ingest

    index = ingest((doc for doc in DOCS), home / "idx", **BM25)
    assert len(index) == 2 and index.add(iter([{"id": "d3", "text": "Owls."}]), progress=False).docs == 1
    with pytest.raises(IngestError) as err:
        ingest(5, home / "other", **BM25)
    assert err.value.field == "source" and err.value.message.endswith(
        "or documents: a list of dicts, a pandas DataFrame or a pyarrow Table; got int 5")


def test_an_empty_source_file_is_said_to_hold_no_documents_as_tessera_ingest_says(home, caplog):
    """``ingest("empty.jsonl", ...)`` returned an empty ``Index`` in silence, where ``tessera ingest`` warns."""
    import logging

    from flows.api import ingest

    (home / "empty.jsonl").write_text("", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        index = ingest(home / "empty.jsonl", home / "idx", **BM25)
    assert len(index) == 0
    said = [record.getMessage() for record in caplog.records]
    assert any(m.startswith(f"source={str(home / 'empty.jsonl')!r} holds no documents") for m in said), said
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert len(ingest([{"id": "a", "text": "  "}], home / "idx2", **BM25)) == 0
    said = [record.getMessage() for record in caplog.records]
    assert f"every document given was skipped (said above): nothing was ingested into {home / 'idx2'}" in said, said


def test_a_document_whose_text_is_not_valid_unicode_is_said_to_be_so(home):
    """A lone surrogate ("\\ud800", as JSON's escapes make one) was refused as "a field must hold one type in every
    document", which every field did."""
    from flows.api import ingest

    with pytest.raises(IngestError) as err:
        ingest([{"id": "a", "text": "Bees \ud800 make honey."}], home / "idx", **BM25)
    assert err.value.field == "source"
    assert "not valid Unicode (surrogates not allowed: '\\ud800' at position 5 of 'Bees" in err.value.message
    assert "one type" not in err.value.message and not (home / "idx").exists()


def test_an_add_of_documents_that_repeat_an_id_is_refused_before_anything_is_embedded(home):
    """``index.add`` kept the last of two documents with one id without a word (it ingests documents in memory with
    ``replace=True``), where ``ingest`` keeps the first and records the other as a failure and ``tessera index add``
    refuses the file: refused now, naming the id; ``update`` keeps the last copy, as ``replace`` does."""
    from flows.api import ingest

    index = ingest(DOCS, home / "idx", **BM25)
    twice = [{"id": "d3", "text": "Owls hunt at night."}, {"id": "d4", "text": "Rivers flow."},
             {"id": "d3", "text": "Barn owls nest in barns."}]
    with pytest.raises(IngestError) as err:
        index.add(twice, progress=False)
    assert err.value.field == "source" and "repeat 1 id(s) ('d3'): ids must be unique" in err.value.message
    staged = sorted(p.name for p in (home / "idx" / "_ingest").iterdir())
    assert len(index) == 2 and len(staged) == 1, staged  # the first ingest's source alone: nothing staged for it
    index.update(twice, progress=False)
    assert index.search("owls", k=1, method="bm25").column("text").to_pylist() == ["Barn owls nest in barns."]
