"""``tessera index add`` and ``tessera ingest`` given a path or name that cannot hold a new index: a file, an index's
manifest, a path under a file, an empty name, ``~nosuchuser/...``, or ``auto`` (the folder ``tessera bench``
builds its indices in). Each is one line with status 2, before any embedding (the encoder or ColBERT model given
does not exist, so an error about it would mean the path was checked too late), and creates nothing. And a corpus
file given as the index to search (``run``, ``index info``) is called a file and offered as the source. Each
command runs in its own process, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESSERA = Path(sys.executable).with_name("tessera")


def one_line_error(*args: str, home: Path) -> str:
    env = {**os.environ, "TESSERA_HOME": str(home)}
    env.pop("TESSERA_DEBUG", None)
    proc = subprocess.run([str(TESSERA), *args], env=env, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "internal error" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture
def docs(tmp_path) -> Path:
    file = tmp_path / "docs.jsonl"
    file.write_text('{"_id": "d1", "text": "honey bees"}\n')
    return file


def add(index: str, docs: Path, home: Path) -> str:
    return one_line_error("index", "add", index, str(docs), "--encoder", str(home / "no-such-model"), home=home)


def ingest(index: str, docs: Path, home: Path) -> str:
    return one_line_error("ingest", "--source", str(docs), "--index", index, "--executor", "local", "--quiet",
                          "--no-dense", "--colbert", str(home / "no-such-model"), home=home)


def test_a_file_a_manifest_or_a_path_under_a_file_is_refused_before_embedding(tmp_path, docs):
    home = tmp_path / "home"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "c1", "text": "wasps"}\n')
    manifest = tmp_path / "idx" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text("{}")
    for command in (add, ingest):
        line = command(str(corpus), docs, home)
        assert f"{corpus} is a file, not an index folder; to index it: `tessera ingest --source {corpus}" in line, line
    assert f"{manifest} is an index's manifest, not the index: give its folder {manifest.parent}" in \
        add(str(manifest), docs, home)
    for command in (add, ingest):
        line = command(str(corpus / "sub"), docs, home)
        assert f"{corpus / 'sub'} is under the file {corpus}, not in a folder" in line, line
    assert corpus.read_text() == '{"_id": "c1", "text": "wasps"}\n' and manifest.read_text() == "{}"


def test_an_empty_name_is_refused_not_made_an_index_in_the_folder_of_all_indices(tmp_path, docs):
    home = tmp_path / "home"
    for command in (add, ingest):
        for name in ("", "  "):
            assert "an index name cannot be empty" in command(name, docs, home)
    assert not (home / "indices").exists()


def test_a_home_folder_of_no_user_is_one_line(tmp_path, docs):
    home = tmp_path / "home"
    lines = [add("~nosuchuser-tessera/x", docs, home), ingest("~nosuchuser-tessera/x", docs, home),
             one_line_error("index", "info", "~nosuchuser-tessera/x", home=home)]
    for line in lines:
        assert "~nosuchuser-tessera names no user's home folder on this machine" in line, line


def test_auto_is_refused_as_it_is_the_folder_bench_builds_its_indices_in(tmp_path, docs):
    home = tmp_path / "home"
    bench = home / "indices" / "auto"
    for index in ("auto", str(bench)):
        for command in (add, ingest):
            line = command(index, docs, home)
            assert f"{bench} is the folder `tessera bench` builds its indices in" in line, line
    assert not bench.exists()


def test_run_and_index_info_call_a_corpus_file_a_file_and_offer_it_as_the_source(tmp_path, docs):
    for args in (["run", "hybrid", "--index", str(docs), "--queries", "honey bees"], ["index", "info", str(docs)]):
        line = one_line_error(*args, home=tmp_path / "home")
        assert f"{docs} is a file, not an index folder" in line, line
        assert f"tessera ingest --source {docs} --index NAME" in line and f"--index {docs}`" not in line, line
