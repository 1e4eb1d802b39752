"""``tessera index add`` and ``tessera ingest`` given a path or name that cannot hold a new index: a file, an index's
manifest, a path under a file, an empty name, ``~nosuchuser/...``, or ``auto`` (the folder ``tessera bench``
builds its indices in). Each is one line with status 2, before any embedding (the encoder or ColBERT model given
does not exist, so an error about it would mean the path was checked too late), and creates nothing. And a corpus
file given as the index to search (``run``, ``index info``) is called a file and offered as the source. The
commands run in this process (``flows.commands.main``, what the console script calls): a process each cost
2-3 s of ``make test-fast``'s two minutes, and tests/flows/test_cli.py runs the console script itself."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from flows.commands import main


@pytest.fixture
def one_line_error(monkeypatch, capsys, tmp_path):
    """A function: ``tessera ARGS`` with ``$TESSERA_HOME`` at ``tmp_path/home``; status 2 and one line on stderr
    asserted, that line returned."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))

    def run(*args: str) -> str:
        monkeypatch.delenv("TESSERA_DEBUG", raising=False)
        capsys.readouterr()
        status = main(list(args))
        stderr = capsys.readouterr().err
        lines = stderr.strip().splitlines()
        assert status == 2 and len(lines) == 1 and "internal error" not in stderr, stderr
        return lines[0]

    return run


@pytest.fixture
def docs(tmp_path) -> Path:
    file = tmp_path / "docs.jsonl"
    file.write_text('{"_id": "d1", "text": "honey bees"}\n')
    return file


def add(error, index: str, docs: Path) -> str:
    return error("index", "add", index, str(docs), "--encoder", str(docs.parent / "no-such-model"))


def ingest(error, index: str, docs: Path) -> str:
    return error("ingest", "--source", str(docs), "--index", index, "--executor", "local", "--quiet", "--no-dense",
                 "--colbert", str(docs.parent / "no-such-model"))


def test_a_file_a_manifest_or_a_path_under_a_file_is_refused_before_embedding(tmp_path, docs, one_line_error):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "c1", "text": "wasps"}\n')
    manifest = tmp_path / "idx" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    for command in (add, ingest):
        line = command(one_line_error, str(corpus), docs)
        assert f"{corpus} is a file, not an index folder; to index it: `tessera ingest --source " \
            f"{shlex.quote(str(corpus))}" in line, line
    assert f"{manifest} is an index's manifest, not the index: give its folder {manifest.parent}" in \
        add(one_line_error, str(manifest), docs)
    for command in (add, ingest):
        line = command(one_line_error, str(corpus / "sub"), docs)
        assert f"{corpus / 'sub'} is under the file {corpus}, not in a folder" in line, line
    assert corpus.read_text() == '{"_id": "c1", "text": "wasps"}\n' and manifest.read_text() == "{}"


def test_an_empty_name_is_refused_not_made_an_index_in_the_folder_of_all_indices(tmp_path, docs, one_line_error):
    home = tmp_path / "home"
    for command in (add, ingest):
        for name in ("", "  "):
            assert "an index name cannot be empty" in command(one_line_error, name, docs)
    assert not (home / "indices").exists()


@pytest.mark.parametrize("name", ["a\nb", "x\ty", "c\x1b[31mred"])
def test_a_name_with_a_control_character_is_refused_not_made_a_folder(tmp_path, docs, one_line_error, name):
    """``tessera index add 'c<ESC>[31mred' docs.jsonl`` made that folder, and its line sent the escape to the
    terminal; a newline made a folder ``a``-newline-``b``, printed over two lines."""
    home = tmp_path / "home"
    said = f"an index name cannot hold control characters (a newline, a tab, an escape), got {name!r}"
    for command in (add, ingest):
        assert said in command(one_line_error, name, docs)
    assert said in one_line_error("run", "bm25", "--index", name, "--queries", "honey bees")
    assert not (home / "indices").exists() or list((home / "indices").iterdir()) == []


def test_a_home_folder_of_no_user_is_one_line(docs, one_line_error):
    lines = [add(one_line_error, "~nosuchuser-tessera/x", docs), ingest(one_line_error, "~nosuchuser-tessera/x", docs),
             one_line_error("index", "info", "~nosuchuser-tessera/x")]
    for line in lines:
        assert "~nosuchuser-tessera names no user's home folder on this machine" in line, line


def test_auto_is_refused_as_it_is_the_folder_bench_builds_its_indices_in(tmp_path, docs, one_line_error):
    home = tmp_path / "home"
    bench = home / "indices" / "auto"
    for index in ("auto", str(bench)):
        for command in (add, ingest):
            line = command(one_line_error, index, docs)
            assert f"{bench} is the folder `tessera bench` builds its indices in" in line, line
    assert not bench.exists()


def test_run_and_index_info_call_a_corpus_file_a_file_and_offer_it_as_the_source(tmp_path, docs, one_line_error):
    for args in (["run", "hybrid", "--index", str(docs), "--queries", "honey bees"], ["index", "info", str(docs)]):
        line = one_line_error(*args)
        assert f"{docs} is a file, not an index folder" in line, line
        assert f"tessera ingest --source {shlex.quote(str(docs))} --index NAME" in line, line
        assert f"--index {docs}`" not in line, line


def test_a_folder_given_as_the_documents_file_is_called_a_folder_not_missing(tmp_path, docs, one_line_error):
    idx = tmp_path / "idx"
    assert main(["index", "add", str(idx), str(docs), "--no-dense"]) == 0
    for command in ("add", "update"):
        line = one_line_error("index", command, str(idx), str(tmp_path))
        assert line.endswith(f"field 'FILE': {tmp_path} is a folder; FILE is one JSON Lines file of documents (to add "
                             f"a folder's files, ingest it: tessera ingest --source {shlex.quote(str(tmp_path))} "
                             "--index ...)"), line
    from operators.store import Index

    assert len(Index.open(idx)) == 1


@pytest.mark.parametrize("name, kind", [("corpus.parquet", "Parquet"), ("corpus.csv", "CSV"), ("report.pdf", "PDF")])
def test_a_file_of_another_format_than_json_lines_is_named_by_its_format(tmp_path, docs, one_line_error, name, kind):
    import pyarrow as pa
    import pyarrow.parquet as pq

    idx, file = tmp_path / "idx", tmp_path / name
    assert main(["index", "add", str(idx), str(docs), "--no-dense"]) == 0
    if kind == "Parquet":  # read as JSON lines, its bytes were "not UTF-8 text ... give the file's encoding"
        pq.write_table(pa.table({"_id": ["p1"], "text": ["wasps"]}), file)
    else:
        file.write_bytes(b"_id,text\nc1,wasps\n" if kind == "CSV" else b"%PDF-1.4\n\xe2\xe3\xcf\xd3\n")
    for command in ("add", "update"):
        line = one_line_error("index", command, str(idx), str(file))
        assert line.endswith(f"field 'FILE': {file} is a {kind} file; FILE is one JSON Lines file of documents (to "
                             f"add a {kind} file's documents, ingest it: tessera ingest --source "
                             f"{shlex.quote(str(file))} --index ...)")
    from operators.store import Index

    assert Index.open(idx).live_doc_ids() == {"d1"}
