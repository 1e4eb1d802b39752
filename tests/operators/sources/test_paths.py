"""operators.sources.paths: a pattern's fixed folders, the folder a source names its files from."""

from __future__ import annotations

from pathlib import Path

from operators.sources.paths import glob_stem, path_root


def test_a_patterns_fixed_folders_and_its_wildcard_part(tmp_path):
    (tmp_path / "pdfs" / "a").mkdir(parents=True)
    (tmp_path / "pdfs" / "a" / "r.pdf").write_bytes(b"")
    assert glob_stem(str(tmp_path / "pdfs" / "**" / "*.pdf")) == (tmp_path / "pdfs", ("**", "*.pdf"))
    assert glob_stem("*.csv") == (Path("."), ("*.csv",))
    assert glob_stem("../data/x.csv") == (Path("../data/x.csv"), ())  # no wildcard: the path itself
    assert glob_stem("~/docs/*.jsonl")[0] == Path.home() / "docs"
    assert path_root(str(tmp_path / "pdfs" / "**" / "*.pdf")) == tmp_path / "pdfs"
    assert path_root(str(tmp_path / "pdfs")) == tmp_path / "pdfs"  # a folder: itself
    assert path_root(str(tmp_path / "pdfs" / "a" / "r.pdf")) == tmp_path / "pdfs" / "a"  # a file: its folder


def test_a_link_to_nothing_in_a_folder_or_glob_is_left_out_with_a_warning_naming_it(tmp_path, caplog):
    from types import SimpleNamespace

    from operators.sources.paths import resolve_paths

    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "gone.jsonl").symlink_to(tmp_path / "moved-away.jsonl")
    op = SimpleNamespace(name="sources.jsonl", step_id="read")
    for pattern, warned in ((str(tmp_path), True), (str(tmp_path / "*.jsonl"), False)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="tessera.sources"):
            assert resolve_paths(pattern, op=op, suffixes=(".jsonl",)) == [tmp_path / "a.jsonl"]
        # once a process: an ingestion lists its source's files in several steps, and named the link four times
        assert [r.getMessage() for r in caplog.records] == [
            f"sources.jsonl [read]: left out 1 link(s) whose target does not exist: {tmp_path / 'gone.jsonl'}"
        ] * warned


def test_a_link_to_nothing_in_a_folder_of_document_files_is_named_too(tmp_path, caplog):
    from operators.registry import create

    (tmp_path / "notes.txt").write_text("Kea are alpine parrots.")
    (tmp_path / "gone.md").symlink_to(tmp_path / "moved-away.md")
    with caplog.at_level("WARNING", logger="tessera.sources"):
        op = create("sources.files", {"path": str(tmp_path)})
        tables = [table for split in op.splits() for table in op.read(split)]
    assert sum(t.num_rows for t in tables) == 1
    warned = f"link(s) whose target does not exist: {tmp_path / 'gone.md'}"
    assert any(warned in record.getMessage() for record in caplog.records)


def test_each_kind_of_pattern_that_finds_no_file_says_which_it_was(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import pytest

    from operators.errors import SourceNotFoundError
    from operators.sources.paths import resolve_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".hidden.jsonl").write_text("{}\n")  # a folder's hidden file is not one of its files
    (tmp_path / "a.jsonl").write_text("{}\n")
    op = SimpleNamespace(name="sources.jsonl", step_id="read")
    for pattern, said in [(str(tmp_path / "empty"), f"folder '{tmp_path / 'empty'}' holds no .jsonl files; give a "
                                                    "file or a glob"),
                          ("*.csv", f"no file matches '*.csv' (working directory {tmp_path})"),
                          ("b.jsonl", f"file 'b.jsonl' does not exist (working directory {tmp_path})")]:
        with pytest.raises(SourceNotFoundError) as raised:
            resolve_paths(pattern, op=op, suffixes=(".jsonl",))
        assert said in str(raised.value) and raised.value.field == "params.path", str(raised.value)
    assert resolve_paths("a.jsonl", op=op) == [Path("a.jsonl")]


def test_a_folder_sources_subfolders_are_named_once_with_the_glob_that_reads_them(tmp_path, caplog):
    import logging

    import pyarrow as pa
    import pytest

    from operators.errors import SourceNotFoundError
    from operators.registry import create

    (tmp_path / "corpus" / "2024").mkdir(parents=True)
    (tmp_path / "corpus" / "a.jsonl").write_text('{"_id": "d1", "text": "Honey bees make honey."}\n')
    (tmp_path / "corpus" / "2024" / "b.jsonl").write_text('{"_id": "d2", "text": "Bees live in hives."}\n')
    op = create("sources.jsonl", {"path": str(tmp_path / "corpus")})
    with caplog.at_level(logging.WARNING, logger="tessera.sources"):
        assert op(pa.table({})).column("docno").to_pylist() == ["d1"]
        op(pa.table({}))
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path}/corpus: 1 subfolder(s) not read: 2024 (a glob reads them too: '{tmp_path}/corpus/**/*.jsonl')"]
    glob_op = create("sources.jsonl", {"path": f"{tmp_path}/corpus/**/*.jsonl"})
    assert glob_op(pa.table({})).column("docno").to_pylist() == ["d2", "d1"]  # the glob's files, sorted by path

    (tmp_path / "corpus" / "a.jsonl").unlink()  # documents only below: the error says how to read them
    with pytest.raises(SourceNotFoundError, match=r"holds no \.jsonl or .* files; give a file or a glob "
                       r"\('.*/corpus/\*\*/\*\.jsonl' reads its 1 subfolder\(s\) too\)"):
        create("sources.jsonl", {"path": str(tmp_path / "corpus")})(pa.table({}))


def test_a_recursive_glob_does_not_go_round_link_loops_and_names_them(tmp_path, caplog):
    """``docs/**/*`` over a folder that links to itself (``self -> .``) matched each file again under ``self/``,
    ``self/self/``, ... (41 times, the last as a link "whose target does not exist"), and two folders linking to
    each other did the same. Each file is now matched once, by its path without the loop, and the loops are named
    once; a link to a folder outside the walk is still followed."""
    from types import SimpleNamespace

    from operators.sources.paths import resolve_paths

    docs = tmp_path / "docs"
    (docs / "a").mkdir(parents=True)
    (docs / "b").mkdir()
    (tmp_path / "other").mkdir()
    for path in (docs / "top.txt", docs / "a" / "in_a.txt", docs / "b" / "in_b.txt", tmp_path / "other" / "o.txt"):
        path.write_text("honey bees")
    (docs / "self").symlink_to(".")
    (docs / "a" / "to_b").symlink_to("../b")
    (docs / "b" / "to_a").symlink_to("../a")  # a and b link to each other: a/to_b/to_a is a again
    (docs / "side").symlink_to("../other")
    op = SimpleNamespace(name="sources.files", step_id="read")
    with caplog.at_level("WARNING", logger="tessera.sources"):
        found = resolve_paths(str(docs / "**" / "*.txt"), op=op)
    # a/to_b/in_b.txt is b/in_b.txt again: read once, under its path without a link (``once_each``)
    assert [str(p.relative_to(docs)) for p in found] == ["a/in_a.txt", "b/in_b.txt", "side/o.txt", "top.txt"]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "not read again below 3 link(s)" in said[0], said
    assert f"{docs / 'self'} -> ." in said[0] and "does not exist" not in said[0]
    assert said[1].startswith("sources.files [read]: left out 2 link(s) to a file read under another path: "
                              f"{docs / 'a' / 'to_b' / 'in_b.txt'} (read as {docs / 'b' / 'in_b.txt'})"), said


def test_a_link_to_a_file_in_the_folder_is_read_once_a_link_outside_and_a_broken_one_are_said(tmp_path, caplog):
    """``link-to-eiffel.md -> eiffel.md`` beside it was a second document, identical to the first. Each real file
    is read once, under its own path; a link to a file outside the folder is a document, under the link's name, and
    a link to nothing is left out, named."""
    import pyarrow as pa

    from operators.registry import create

    docs, outside = tmp_path / "docs", tmp_path / "elsewhere"
    docs.mkdir()
    outside.mkdir()
    (docs / "eiffel.md").write_text("# Eiffel\n\nThe Eiffel tower is in Paris.\n")
    (docs / "tokyo.txt").write_text("Tokyo tower is red.\n")
    (outside / "kiwi.md").write_text("Kiwi are flightless birds.\n")
    (docs / "a-link-to-eiffel.md").symlink_to("eiffel.md")  # before its file in name order: the file's path wins
    (docs / "link-to-eiffel.md").symlink_to(docs / "eiffel.md")
    (docs / "kiwi-link.md").symlink_to(outside / "kiwi.md")
    (docs / "broken.md").symlink_to("gone.md")
    for pattern in (str(docs), str(docs / "*")):
        caplog.clear()
        with caplog.at_level("WARNING", logger="tessera.sources"):
            table = create("sources.files", {"path": pattern})(pa.table({}))
        assert table.column("docno").to_pylist() == ["eiffel.md", "kiwi-link.md", "tokyo.txt"], pattern
        assert table.column("text").to_pylist()[1].strip() == "Kiwi are flightless birds."
        said = [r.getMessage() for r in caplog.records]
        if pattern == str(docs):  # once a process, as the broken link
            assert f"left out 1 link(s) whose target does not exist: {docs / 'broken.md'}" in said[0], said
            assert said[1].endswith(f"]: left out 2 link(s) to a file read under another path: "
                               f"{docs / 'a-link-to-eiffel.md'} (read as {docs / 'eiffel.md'}), "
                               f"{docs / 'link-to-eiffel.md'} (read as {docs / 'eiffel.md'})"), said
