"""``tessera index list``: the indices under ``$TESSERA_HOME/indices``, each with its counts or, for one that cannot
be opened (a manifest cut short, one lost beside its shards), the reason in one line, the listing going on. There was
no such command ("invalid choice: 'list'"): a user told ``no index at ...`` could not see which names exist. Real
BM25 indices made by ``tessera index add``, ``tessera`` in-process."""

from __future__ import annotations

import json
import shutil

from tests.flows.test_cli import tessera_in_process
from tests.text_checks import TRACEBACK


def test_index_list_shows_each_index_and_what_is_wrong_with_the_broken_ones(tmp_path, monkeypatch, capsys):
    home, corpus = tmp_path / "home", tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "text": "honey bees"}) + "\n"
                      + json.dumps({"_id": "d2", "text": "opera singers"}) + "\n")
    empty = tessera_in_process(monkeypatch, capsys, "index", "list", home=home)
    assert empty.stdout.startswith(f"no index in {home / 'indices'}")
    tessera_in_process(monkeypatch, capsys, "index", "add", "good", str(corpus), "--no-dense", home=home)
    indices = home / "indices"
    shutil.copytree(indices / "good", indices / "cut")
    manifest = (indices / "cut" / "manifest.json").read_bytes()
    (indices / "cut" / "manifest.json").write_bytes(manifest[: len(manifest) // 2])  # a manifest cut short
    shutil.copytree(indices / "good", indices / "lost")
    (indices / "lost" / "manifest.json").unlink()

    proc = tessera_in_process(monkeypatch, capsys, "index", "list", home=home)
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["cut", "good", "lost"], proc.stdout
    assert lines[0].startswith("cut   not usable: unreadable manifest ") and TRACEBACK not in proc.stderr
    assert lines[1] == "good  1 shard(s), 2 live chunk(s)"
    assert lines[2].startswith("lost  not usable: ") and "holds 1 shard folder(s) but no manifest.json" in lines[2]

    listed = json.loads(tessera_in_process(monkeypatch, capsys, "index", "list", "--json", home=home).stdout)
    by_name = {record["name"]: record for record in listed["indices"]}
    assert (by_name["good"]["shards"], by_name["good"]["live_chunks"], by_name["good"]["unfinished"]) == (1, 2, False)
    assert "unreadable manifest" in by_name["cut"]["error"] and "shards" not in by_name["cut"]


def test_a_name_that_is_no_index_points_to_index_list(tmp_path, monkeypatch, capsys):
    """A mistyped name said only "not found; build one": the names there were left to find by hand."""
    from tests.flows.test_cli import assert_one_line_error

    home = tmp_path / "home"
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", "nope", home=home, check=None)
    assert_one_line_error(proc, f"no index at {home / 'indices' / 'nope'}", "`tessera index list` lists the indices")
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", str(tmp_path / "nope"), home=home, check=None)
    assert "index list" not in assert_one_line_error(proc, "not found")
