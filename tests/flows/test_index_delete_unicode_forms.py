"""A file named on macOS (``café.txt`` as ``cafe`` + U+0301, NFD) gives its document an NFD id; ``tessera index
delete --doc-id café.txt`` typed on a keyboard (NFC) said "no live chunk has doc id 'café.txt'". The stored id is
kept (``--sync`` matches it against the file's name); the lookup finds it in either form. A real folder ingested
in-process into a real BM25 index."""

from __future__ import annotations

import unicodedata

from tests.flows.test_cli import tessera_in_process

NFC, NFD = (unicodedata.normalize(form, "café.txt") for form in ("NFC", "NFD"))


def _index_of(tmp_path, monkeypatch, capsys, names: dict[str, str]):
    (tmp_path / "notes").mkdir()
    for name, text in names.items():
        (tmp_path / "notes" / name).write_text(text)
    tessera_in_process(monkeypatch, capsys, "ingest", "--source", str(tmp_path / "notes"), "--index",
                       str(tmp_path / "idx"), "--no-dense", "--no-chunk", "--executor", "local", home=tmp_path / "h")
    return tmp_path / "idx"


def _live(path) -> set[str]:
    from operators.store import Index

    return set(Index.open(path).columns(["doc_id"])[1].column("doc_id").to_pylist())


def test_an_nfc_doc_id_deletes_the_document_of_an_nfd_file_name(tmp_path, monkeypatch, capsys):
    idx = _index_of(tmp_path, monkeypatch, capsys, {NFD: "a café serves espresso", "bees.txt": "honey bees"})
    assert _live(idx) == {NFD, "bees.txt"}  # the id as the file system gave it
    done = tessera_in_process(monkeypatch, capsys, "index", "delete", str(idx), "--doc-id", NFC, "--json",
                              home=tmp_path / "h")
    assert '"deleted_chunks": 1' in done.stdout, done
    assert _live(idx) == {"bees.txt"}


def test_an_id_in_neither_of_two_stored_forms_is_refused_and_nothing_is_deleted(tmp_path, monkeypatch, capsys):
    mixed = "caf\u00e9 lai\u0301t.txt"  # é composed, í not: neither NFC nor NFD
    nfc, nfd = unicodedata.normalize("NFC", mixed), unicodedata.normalize("NFD", mixed)
    assert len({mixed, nfc, nfd}) == 3
    import pyarrow as pa

    from operators.store import Index, IndexSettings

    idx = tmp_path / "idx"
    Index.create(idx, IndexSettings(dense=False)).add(pa.table({
        "docno": [f"{nfc}#0", f"{nfd}#0"], "doc_id": [nfc, nfd], "title": ["a", "b"], "text": ["one", "two"]}))
    refused = tessera_in_process(monkeypatch, capsys, "index", "delete", str(idx), "--doc-id", mixed,
                                 home=tmp_path / "h", check=None)
    assert refused.returncode != 0 and "two Unicode forms" in refused.stderr and "--doc-id" in refused.stderr, refused
    assert _live(idx) == {nfc, nfd}
