"""Options mixed up are refused naming them, before anything runs: two that contradict each other (not one of them
ignored), a corpus file given where the index goes. Through flows.commands.main, in a TESSERA_HOME of the test's
own."""

from __future__ import annotations

import pytest

from flows.commands import main


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize("command", [["run", "bm25", "-q", "bees"], ["chat", "rag"]])
def test_no_cache_with_a_cache_dir_is_refused_not_ignored(home, tmp_path, capsys, command):
    """The folder was ignored: the run went on without a cache (as bench refuses --mlflow-uri with --no-mlflow)."""
    assert main([*command, "--no-cache", "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "--no-cache and --cache-dir: give one" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("command, option, source", [
    (["ingest", "--source", "corpus.jsonl", "--index", "corpus.jsonl"], "--index", "--source"),
    (["index", "add", "corpus.jsonl", "corpus.jsonl"], "NAME_OR_PATH", "FILE"),
])
def test_a_corpus_file_given_as_the_index_name_is_refused(home, tmp_path, monkeypatch, capsys, command, option, source):
    """A bare name is an index under $TESSERA_HOME: a file of that name here made an index named after the file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.jsonl").write_text('{"_id": "a", "text": "honey bees"}\n')
    assert main(command) == 2
    err = capsys.readouterr().err
    assert f"{option} 'corpus.jsonl' is a file in this folder" in err and f"the corpus file goes in {source}" in err
    assert not (home / "indices" / "corpus.jsonl").exists()


def test_replace_on_a_source_already_committed_says_nothing_was_replaced(home, tmp_path, capsys):
    """Its shards are done, so the run finds nothing to do: exit 0 without a word before, the edits kept."""
    import json

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"honey bees {i}"}) + "\n" for i in range(5)))
    args = ["ingest", "--source", str(corpus), "--index", str(tmp_path / "idx"), "--no-dense", "--executor", "local",
            "--quiet"]
    assert main(args) == 0 and "nothing was replaced" not in capsys.readouterr().err
    assert main([*args, "--replace"]) == 0
    err = capsys.readouterr().err
    assert "nothing was replaced: every shard of this source was committed" in err and "tessera index update" in err


def test_a_source_ingested_with_replace_run_again_without_it_is_told_to_add_it(home, tmp_path, capsys):
    """A repeated id staged as its last copy (--replace) and then as its first (without): it said "none of its files
    changed ...: this release of Tessera reads them otherwise", where only the option differs."""
    import json

    folder = tmp_path / "jf"
    folder.mkdir()
    first = [{"_id": "1", "text": "one"}, {"_id": "2", "text": "two"}]
    (folder / "a.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in first))
    (folder / "b.jsonl").write_text(json.dumps({"_id": "1", "text": "one again"}) + "\n")
    args = ["ingest", "--source", str(folder), "--index", str(tmp_path / "idx"), "--no-dense", "--no-chunk",
            "--executor", "local", "--quiet"]
    assert main([*args, "--replace"]) == 0
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "it was ingested with --replace, which keeps the last copy of a repeated id: ingest it with --replace " \
        "again" in err and "this release" not in err, err
    assert main([*args, "--replace"]) == 0  # as then: nothing to do
