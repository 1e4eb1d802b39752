"""A new user's own files through ``tessera ingest`` (in-process, BM25 only, real files in tmp_path): encodings other
than UTF-8, Markdown front matter, id fields beside ``_id``, texts that are not strings, and ``--replace``'s counts."""

from __future__ import annotations

import json

from flows.ingestion import ingest
from operators.store import Index

BM25_ONLY = {"dense": False}


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def rows_by_doc(index_path) -> dict[str, dict]:
    index = Index.open(index_path)
    _, table = index.columns(index.column_names())
    return {row["doc_id"]: row for row in table.to_pylist()}


def test_replace_counts_each_document_once_not_each_copy_and_only_chunks_left_searchable(tmp_path):
    """'4 docs -> 2 chunks' for a file of two ids written twice: the summary counted the copies a later one replaced
    (within a shard, and across shards: '4 docs -> 4 chunks in 4 shard(s)' for an index of 2 documents). Its chunks
    were those written, an earlier copy's too, which the later shard's commit took out of the index: '10 chunks'
    for 4 searchable ones."""
    path = tmp_path / "docs.jsonl"
    longer = " one two three four five"  # the first copies: 3 chunks of 3 words each, the last copies 2
    write_jsonl(path, [{"_id": f"d{i % 2}", "text": f"copy {i} of d{i % 2}" + (longer if i < 2 else "")}
                       for i in range(4)])
    for shard_size in (5000, 1):
        index = tmp_path / f"idx{shard_size}"
        report = ingest(path, index, settings=BM25_ONLY, executor="local", chunk={"unit": "words", "size": 3,
                        "overlap": 0}, progress=False, shard_size=shard_size, replace=True)
        live = Index.open(index)
        texts = live.columns(["doc_id", "text"])[1].to_pylist()
        assert sorted((r["doc_id"], r["text"]) for r in texts) == [
            ("d0", "copy 2 of"), ("d0", "d0"), ("d1", "copy 3 of"), ("d1", "d1")], texts
        assert (report.docs, report.chunks) == (2, len(live)) == (2, 4), (shard_size, report)


def test_a_text_title_or_id_that_is_not_a_string_is_its_json_text_as_in_parquet(tmp_path):
    """A JSONL "text": true became "True" (Python's name for it), where the same value in a Parquet column is
    "true", and a list or an object already was its JSON text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": "b", "title": False, "text": True}, {"_id": True, "text": 1.5},
                       {"_id": 7, "title": {"k": "v"}, "text": ["x", 2]}])
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (3, 0)
    rows = rows_by_doc(tmp_path / "idx")
    assert (rows["b"]["title"], rows["b"]["text"]) == ("false", "true")
    assert rows["true"]["text"] == "1.5"
    assert (rows["7"]["title"], rows["7"]["text"]) == ('{"k": "v"}', '["x", 2]')
    pq.write_table(pa.table({"_id": ["p"], "text": [True], "title": [False]}), tmp_path / "docs.parquet")
    ingest(tmp_path / "docs.parquet", tmp_path / "pq", settings=BM25_ONLY, executor="local", chunk=False,
           progress=False)
    assert (rows_by_doc(tmp_path / "pq")["p"]["title"], rows_by_doc(tmp_path / "pq")["p"]["text"]) == ("false", "true")


def test_id_fields_beside_the_one_used_are_kept_as_metadata_or_named_in_a_warning(tmp_path, caplog):
    """With `_id` present, a record's `id` (a second id: an ISBN, a row number) was dropped without a word, and so
    were `docno` and `doc_id`, which name the index's own columns and cannot be kept under those names."""
    import logging

    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": "a", "id": 42, "docno": "X-1", "doc_id": "Y-1", "text": "alpha"},
                       {"id": "b", "text": "beta: its id is its id field"}])
    csv = tmp_path / "docs.csv"
    csv.write_text("_id,id,text\nc,ISBN-1,gamma\n")
    caplog.set_level(logging.WARNING)
    for source in (path, csv):
        ingest(source, tmp_path / f"idx_{source.suffix[1:]}", settings=BM25_ONLY, executor="local", chunk=False,
               progress=False)
    rows = rows_by_doc(tmp_path / "idx_jsonl")
    assert (rows["a"]["id"], rows["b"]["id"]) == (42, None)  # b's id field is its id, not metadata too
    assert rows["a"]["docno"] == "a" and rows["a"]["doc_id"] == "a"
    assert rows_by_doc(tmp_path / "idx_csv")["c"]["id"] == "ISBN-1"
    shown = [r.getMessage() for r in caplog.records]
    [docno] = [m for m in shown if "docno" in m and "left out" in m]
    assert str(path) in docno and "_id" in docno, docno
    [doc_id] = [m for m in shown if "doc_id" in m and "left out" in m]
    assert str(path) in doc_id, doc_id


def test_markdown_front_matter_is_the_documents_title_and_fields_not_its_text(tmp_path, caplog):
    """A Markdown file's YAML front matter (Jekyll, Hugo, Obsidian) stayed in the text, where BM25 matched its
    keys and every passage of it began with 'layout: post'; its fields were not metadata a filter could read."""
    import logging

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "post.md").write_text("---\ntitle: 'Kea in winter'\nauthor: Ana\nyear: 2021\ndate: 2021-07-01\n"
                                    "draft: false\ntags: [birds, alps]\n---\n# A heading\n\nKea play in snow.\n")
    (folder / "broken.md").write_text("---\ntitle: [unclosed\n---\nHuia text.\n")
    (folder / "rule.md").write_text("---\n\nA note after a rule, with no front matter.\n")
    caplog.set_level(logging.WARNING)
    report = ingest(folder, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (3, 0)
    rows = rows_by_doc(tmp_path / "idx")
    post = rows["post.md"]
    assert (post["title"], post["text"]) == ("Kea in winter", "# A heading\n\nKea play in snow.\n")
    assert (post["author"], post["year"], post["date"], post["draft"]) == ("Ana", 2021, "2021-07-01", False)
    assert post["tags"] == '["birds", "alps"]'
    assert rows["broken.md"]["text"].startswith("---\ntitle: [unclosed") and rows["broken.md"]["author"] is None
    assert rows["rule.md"]["text"] == "---\n\nA note after a rule, with no front matter.\n"
    [warning] = [r.getMessage() for r in caplog.records if "front matter" in r.getMessage()]
    assert "broken.md" in warning and "not valid YAML" in warning, warning
    hits = Index.open(tmp_path / "idx").search_bm25(["author"], k=3)[0].docnos
    assert "post.md" not in hits


def test_files_that_are_not_utf8_are_read_in_a_guessed_encoding_named_in_a_warning(tmp_path, caplog):
    """A Windows-1252 export (Excel's CSV, an old text file) was a failure of every line or file with a byte that
    is not UTF-8 ('save it as UTF-8'); there was no option to say what the encoding is."""
    import logging

    folder = tmp_path / "docs"
    folder.mkdir()
    latin = "Le café est très chaud à Noël. Ça coûte cher, garçon: Über die Brücke."
    (folder / "notes.txt").write_bytes(latin.encode("cp1252"))
    (folder / "résumé.md").write_text("# Résumé\n\nDéjà vu, naïve café.\n")  # UTF-8: read as it is
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_bytes(json.dumps({"_id": "j", "text": latin}, ensure_ascii=False).encode("cp1252") + b"\n")
    csv = tmp_path / "docs.csv"
    csv.write_bytes(f"_id,text\nc,{latin.replace(',', ';')}\n".encode("cp1252"))
    caplog.set_level(logging.WARNING)
    for source in (folder, jsonl, csv):
        report = ingest(source, tmp_path / f"idx_{source.name}", settings=BM25_ONLY, executor="local", chunk=False,
                        progress=False)
        assert (report.docs, report.failures) == (2 if source is folder else 1, 0), source
    texts = {**rows_by_doc(tmp_path / "idx_docs"), **rows_by_doc(tmp_path / "idx_docs.jsonl"),
             **rows_by_doc(tmp_path / "idx_docs.csv")}
    assert texts["notes.txt"]["text"] == latin and texts["j"]["text"] == latin
    assert texts["c"]["text"] == latin.replace(",", ";")
    assert texts["résumé.md"]["title"] == "Résumé" and texts["résumé.md"]["text"].endswith("naïve café.\n")
    warned = [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert len(warned) == 3 and all("read as cp1252" in m for m in warned), warned
    assert any("notes.txt" in m for m in warned) and not any("résumé.md" in m for m in warned)
    assert any(str(jsonl) in m for m in warned) and any(str(csv) in m for m in warned)


def test_utf8_text_with_a_stray_byte_stays_utf8_and_a_latin1_line_beside_it_is_guessed(tmp_path, caplog):
    """A UTF-8 line with one stray byte was read in a guessed code page: its every accented letter mangled
    ('ZĂĽrich cafĂ©') for the one byte. It stays UTF-8, the byte read as U+FFFD, with one warning per file; a
    Latin-1 line with no UTF-8 in it (a mixed export) is still guessed."""
    import logging

    good = json.dumps({"_id": "u", "text": "Zürich café, naïve résumé"}, ensure_ascii=False).encode()
    stray = json.dumps({"_id": "s", "text": "Zürich café STRAY"}, ensure_ascii=False).encode()
    jsonl = tmp_path / "docs.jsonl"
    last = stray.replace(b'"s"', b'"t"').replace(b"STRAY", b"\xff")
    jsonl.write_bytes(b"\n".join([good, stray.replace(b"STRAY", b"\x92 byte"), last]) + b"\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "note.txt").write_bytes("Grüße aus Zürich. ".encode() * 20 + b"stray \x92 byte")
    caplog.set_level(logging.WARNING)
    for source in (jsonl, tmp_path / "docs"):
        report = ingest(source, tmp_path / f"idx_{source.name}", settings=BM25_ONLY, executor="local", chunk=False,
                        progress=False)
        assert report.failures == 0
    rows = rows_by_doc(tmp_path / "idx_docs.jsonl")
    assert rows["u"]["text"] == "Zürich café, naïve résumé"
    assert rows["s"]["text"] == "Zürich café \ufffd byte" and rows["t"]["text"] == "Zürich café \ufffd"
    assert rows_by_doc(tmp_path / "idx_docs")["note.txt"]["text"].endswith("Zürich. stray \ufffd byte")
    warned = [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert len(warned) == 2 and all("read as UTF-8, each such byte as U+FFFD" in m for m in warned), warned
    at = len("Grüße aus Zürich. ".encode()) * 20 + len(b"stray ") + 1
    assert str(jsonl) in warned[0] and "note.txt" in warned[1] and f"(0x92 at byte {at})" in warned[1]
    caplog.clear()
    mixed = tmp_path / "mixed.jsonl"
    latin = "Le café est très chaud à Noël. Ça coûte cher, garçon: Über die Brücke."
    mixed.write_bytes(good + b"\n" + json.dumps({"_id": "l", "text": latin}, ensure_ascii=False).encode("cp1252")
                      + b"\n")
    ingest(mixed, tmp_path / "idx_mixed", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert rows_by_doc(tmp_path / "idx_mixed")["l"]["text"] == latin
    assert [m for m in (r.getMessage() for r in caplog.records) if "guesses" in m]


def test_an_encoding_given_is_used_and_a_wrong_or_unknown_one_is_named(tmp_path, capsys, monkeypatch):
    from flows.commands import main
    from flows.ingestion.ledger import Ledger

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    path = tmp_path / "greek.txt"
    path.write_bytes("Καλημέρα κόσμε".encode("iso8859-7"))
    status = main(["ingest", "--source", str(path), "--index", str(tmp_path / "idx"), "--no-dense", "--no-chunk",
                   "--quiet", "--encoding", "iso8859-7"])
    assert status == 0 and rows_by_doc(tmp_path / "idx")["greek.txt"]["text"] == "Καλημέρα κόσμε"
    status = main(["ingest", "--source", str(path), "--index", str(tmp_path / "bad"), "--no-dense", "--quiet",
                   "--encoding", "klingon"])
    err = capsys.readouterr().err
    assert status == 2 and "unknown encoding 'klingon'" in err and "encoding" in err, err
    utf8 = tmp_path / "strict.txt"
    utf8.write_bytes(b"caf\xe9")
    report = ingest(utf8, tmp_path / "strict", settings=BM25_ONLY, executor="local", chunk=False, progress=False,
                    encoding="utf-8")
    assert (report.docs, report.failures) == (0, 1)
    [failure] = Ledger(tmp_path / "strict").open_failures(Index.open(tmp_path / "strict").finished_shards())
    assert "'strict.txt' is not UTF-8 text" in failure.error and "--encoding" in failure.error, failure.error


def test_a_short_polish_windows_1250_file_is_read_as_windows_1250_and_a_spanish_one_stays_windows_1252(tmp_path,
                                                                                                        caplog):
    """charset-normalizer reads a few Polish words in Windows-1250 as UTF-16 (no guess: the file failed, 'give its
    encoding'), as Chinese, or ties them with Windows-1252, which was taken ('mas³o'). Windows-1250 is taken where
    every byte it reads differently is a letter in it and Windows-1252 puts a symbol inside a word; '¿Qué' is
    Spanish still."""
    import logging

    folder = tmp_path / "notes"
    folder.mkdir()
    texts = {"couple.txt": ("Mąż i żona", "cp1250"),
             "shopping.txt": ("Notatka: zakupy – chleb, masło, jabłka.", "cp1250"),
             "czech.txt": ("Příliš žluťoučký kůň úpěl ďábelské ódy.", "cp1250"),
             "spanish.txt": ("¿Qué tal? Año nuevo, señor.", "cp1252")}
    for name, (text, encoding) in texts.items():
        (folder / name).write_bytes(text.encode(encoding))
    caplog.set_level(logging.WARNING)
    report = ingest(folder, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (4, 0)
    assert {name: row["text"] for name, row in rows_by_doc(tmp_path / "idx").items()} == {
        name: text for name, (text, _) in texts.items()}
    guessed = {name: encoding for name, (_, encoding) in texts.items()
               if any(f"{name}: not UTF-8" in r.getMessage() and f"read as {encoding}" in r.getMessage()
                      for r in caplog.records)}
    assert guessed == {name: encoding for name, (_, encoding) in texts.items()}


def test_a_french_excel_export_is_read_as_windows_1252_not_baltic():
    """Forty short French rows in Windows-1252: charset-normalizer measured Baltic cp1257 a little cleaner (chaos 0.0
    against 0.016), which was taken ('très' read as 'trčs'); Windows-1252 is taken when it is nearly as clean."""
    from operators.sources.encoding import guess_encoding

    words = ["café", "très", "élève", "naïve", "garçon", "déjà", "où", "crème brûlée", "Noël", "façade"]
    rows = "".join(f"f{i},Titre {i},Le {words[i % 10]} est ici numéro {i}\n" for i in range(40))
    sample = ("_id,title,text\n" + rows).encode("cp1252")
    assert guess_encoding(sample, lines=True) == "cp1252"
    assert sample.decode("cp1252").count("très") == 4


def test_a_french_jsonl_line_is_read_as_windows_1252_not_baltic():
    """A single French line measured clean as Baltic cp1257 and unclean as Windows-1252 (chaos 0.0 against 0.082),
    far beyond the margin of the test above: 'crème brûlée' was stored as 'crčme brūlée'. Every byte of it over 127
    is a Western letter in Windows-1252, which is taken then."""
    from operators.sources.encoding import guess_encoding

    text = '{"_id": "l1", "title": "Français", "text": "très bien café crème brûlée déjà vu"}\n'
    sample = text.encode("latin-1")
    assert guess_encoding(sample, lines=True) == "cp1252" and sample.decode("cp1252") == text


def test_index_info_names_each_source_and_the_folder_a_documents_path_is_from(tmp_path, monkeypatch, capsys):
    """A hit of a folder of files gives its ``path`` from the folder (``science/curie.md``), and nothing said which
    folder that was: ``tessera index info`` listed shards alone. It now names each source, its documents, and for
    files the folder their paths start from, absolute where the source was given relative; after a sync, the
    documents the source still has."""
    from flows.commands import main

    notes = tmp_path / "notes"
    (notes / "science").mkdir(parents=True)
    (notes / "kea.md").write_text("# Kea\n\nKea are alpine parrots.\n")
    (notes / "science" / "curie.md").write_text("# Curie\n\nShe shared the 1903 Nobel Prize in Physics.\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    assert main(["ingest", "--source", "notes/**/*", "--index", "idx", "--no-dense", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["index", "info", "idx", "--json"]) == 0
    [source] = json.loads(capsys.readouterr().out)["sources"]
    assert {k: v for k, v in source.items() if k != "source_key"} == {
        "op": "sources.files", "source": str(notes / "**" / "*"), "recorded": None, "there": True, "shards": 1,
        "docs": 2, "paths_from": str(notes)}
    hit = Index.open(tmp_path / "home" / "indices" / "idx").search_bm25(["Nobel"], k=1)[0].docnos[0]
    assert (notes / Index.open(tmp_path / "home" / "indices" / "idx").documents([hit]).to_pylist()[0]["path"]).exists()
    (notes / "kea.md").unlink()
    assert main(["ingest", "--source", "notes/**/*", "--index", "idx", "--no-dense", "--quiet", "--sync"]) == 0
    capsys.readouterr()
    assert main(["index", "info", "idx"]) == 0
    assert (f"  source {notes}/**/* (sources.files): 1 document(s) in 1 shard(s); a document's path is from {notes}"
            in capsys.readouterr().out.splitlines())
