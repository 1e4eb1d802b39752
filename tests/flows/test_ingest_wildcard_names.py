"""A source file or folder whose own name holds a glob's wildcard (``docs [v2].jsonl``, ``notes [draft]/``,
``what?.jsonl``) is read as itself: ``tessera ingest`` took it for the glob it spells, which matches other names
and never its own, and refused it with ``no file matches it`` where the file was."""

from __future__ import annotations

import json

import pytest

from flows.commands import main
from operators.store import Index


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _docs(path, ids):
    path.write_text("".join(json.dumps({"_id": i, "text": f"honey bees {i}"}) + "\n" for i in ids))
    return path


@pytest.mark.parametrize("name", ["docs [v2].jsonl", "what?.jsonl", "all*.jsonl"])
def test_a_file_named_with_a_wildcard_is_that_file(home, tmp_path, name, capsys):
    source = _docs(tmp_path / name, ["a1", "a2"])
    _docs(tmp_path / "docs 2.jsonl", ["other"])  # what '[v2]' would match, as a glob
    _docs(tmp_path / "whatX.jsonl", ["other"])
    _docs(tmp_path / "all-old.jsonl", ["other"])
    index = tmp_path / "idx"
    assert main(["ingest", "--source", str(source), "--index", str(index), "--no-dense", "--quiet"]) == 0, \
        capsys.readouterr().err
    assert Index.open(index).live_doc_ids() == {"a1", "a2"}


def test_a_folder_named_with_a_wildcard_is_that_folder(home, tmp_path, capsys):
    folder = tmp_path / "notes [draft]"
    folder.mkdir()
    (folder / "bees.md").write_text("# Bees\n\nHoney bees make honey.\n")
    (tmp_path / "notes d").mkdir()  # what '[draft]' would match, as a glob
    (tmp_path / "notes d" / "other.md").write_text("# Other\n\nNot this one.\n")
    index = tmp_path / "idx"
    assert main(["ingest", "--source", str(folder), "--index", str(index), "--no-dense", "--quiet"]) == 0, \
        capsys.readouterr().err
    [doc_id] = Index.open(index).live_doc_ids()
    assert "bees" in doc_id and "other" not in doc_id


@pytest.mark.parametrize("pattern", ["*.md", "**/*.md"])
def test_a_glob_inside_a_folder_named_with_a_wildcard_reads_its_files(home, tmp_path, pattern, capsys):
    folder = tmp_path / "notes [draft]"
    (folder / "sub").mkdir(parents=True)
    (folder / "bees.md").write_text("# Bees\n\nHoney bees make honey.\n")
    (folder / "sub" / "wasps.md").write_text("# Wasps\n\nWasps make paper.\n")
    (tmp_path / "notes d").mkdir()  # what '[draft]' would match, as a glob
    (tmp_path / "notes d" / "other.md").write_text("# Other\n\nNot this one.\n")
    index = tmp_path / "idx"
    assert main(["ingest", "--source", f"{folder}/{pattern}", "--index", str(index), "--no-dense", "--quiet"]) == 0, \
        capsys.readouterr().err
    ids = Index.open(index).live_doc_ids()
    assert len(ids) == (2 if pattern.startswith("**") else 1) and not any("other" in i for i in ids), ids
