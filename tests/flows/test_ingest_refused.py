"""An ingest into an existing index whose commit the index refuses (an id already live, a metadata column of
another type) is reported as refused, with the reason and what lifts it, not as an ingestion "interrupted, or
still running" whose resume would fail the same way; its committed shards answer searches, and the fixed file
resumes. BM25 only, tiny JSONL files, in-process."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from flows.commands import main
from operators.store import Index


def _write(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def _ingest(source: Path, index: Path, *extra: str) -> int:
    return main(["ingest", "--source", str(source), "--index", str(index), "--shard-size", "1", "--executor",
                 "local", "--no-dense", "--quiet", *extra])


def _unfinished(capsys, index: Path) -> list[dict]:
    capsys.readouterr()
    assert main(["index", "info", str(index), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["unfinished_ingestions"]


def _search(capsys, index: Path, query: str) -> tuple[list[str], list[str]]:
    """The warnings of ``tessera run bm25`` and the doc ids it found."""
    capsys.readouterr()
    assert main(["run", "bm25", "--index", str(index), "-q", query, "--no-cache", "--quiet", "--json"]) == 0
    out = capsys.readouterr()
    return ([line for line in out.err.splitlines() if line.startswith("tessera: warning:")],
            [row["doc_id"] for row in json.loads(out.out)["rows"]])


def test_an_id_already_in_the_index_is_reported_as_refused_and_the_fixed_file_resumes(tmp_path, capsys,
                                                                                     monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    assert _ingest(_write(tmp_path / "a.jsonl", [{"id": "d1", "text": "the quick brown fox"}]), index) == 0
    second = _write(tmp_path / "b.jsonl", [{"id": "d3", "text": "cats purr softly"},
                                           {"id": "d1", "text": "the quick brown fox again"}])
    assert _ingest(second, index) == 2  # shard 0 (d3) commits, shard 1 (d1) is refused
    said = capsys.readouterr().err  # in the ingest's terms, not the index's (Index.upsert, tessera index update)
    assert "document(s) ['d1'] (1 in all) are already live" in said and \
        "replace the index's copies: tessera ingest --replace (in Python, replace=True)" in said
    assert "upsert" not in said and "index update" not in said

    [record] = _unfinished(capsys, index)
    assert record["refused"]["field"] == "doc_id" and "document(s) ['d1'] (1 in all)" in record["refused"]["reason"]
    assert "upsert" not in record["refused"]["reason"]  # the index's own advice gives way to the ingestion's
    assert record["refused"]["advice"] == "fix the file or add --replace"
    assert main(["index", "info", str(index)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "unfinished ingestion" in x)
    assert "refused: shard" in line and "fix the file or add --replace" in line and "interrupted" not in line
    [warning], found = _search(capsys, index, "cats purr")
    assert "refused:" in warning and "interrupted" not in warning
    assert found[0] == "d3"  # the committed shard answers

    _write(second, [{"id": "d3", "text": "cats purr softly"}, {"id": "d4", "text": "a new fox"}])  # fixed
    assert _ingest(second, index) == 0
    assert _unfinished(capsys, index) == []
    assert {d for d in Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()} == {"d1", "d3", "d4"}


def test_the_shards_from_the_first_live_id_on_are_refused_before_any_work_on_them(tmp_path, monkeypatch):
    """The live ids are found once the source is staged: the shards before the first one holding such an id are
    ingested and commit, that shard and every one after it are not processed at all (their documents would have
    been embedded, minutes or hours of a large file, only for the commit to refuse them)."""
    from flows.ingestion import ingest
    from operators.store import CommitError

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    assert _ingest(_write(tmp_path / "a.jsonl", [{"id": "d1", "text": "the quick brown fox"}]), index) == 0
    second = _write(tmp_path / "b.jsonl", [{"id": "d3", "text": "cats purr softly"},
                                           {"id": "d4", "text": "owls hoot at night"},
                                           {"id": "d1", "text": "the quick brown fox again"},
                                           {"id": "d5", "text": "a new fox"}])
    events = []
    with pytest.raises(CommitError, match=r"document\(s\) \['d1'\] \(1 in all\) are already live") as refused:
        ingest(second, index, shard_size=1, executor="local", settings={"dense": False}, progress=False,
               on_progress=events.append)
    assert refused.value.field == "doc_id" and "--replace" in refused.value.advice
    planned = [e for e in events if e.stage == "ingest"]
    assert {(e.docs_total, e.shards_total) for e in planned} == {(2, 2)}  # d3 and d4, not d1 nor d5
    assert sorted(Index.open(index).live_doc_ids()) == ["d1", "d3", "d4"]


def test_a_source_refused_before_any_of_it_commits_leaves_no_unfinished_ingestion(tmp_path, capsys, monkeypatch):
    """A glob of files already ingested under their folder: refused (their ids are live), and then every search and
    ``index info`` warned of an unfinished, refused ingestion, which only --replace (embedding them again) or
    deleting ``_ingest/`` by hand made go away. Nothing of it is in the index, so nothing is left to finish."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index, folder = tmp_path / "idx", tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\nBees make honey.\n")
    (folder / "c.txt").write_text("Opera houses.\n")
    one_shard = ["--index", str(index), "--executor", "local", "--no-dense", "--quiet"]
    assert main(["ingest", "--source", str(folder), *one_shard]) == 0
    assert main(["ingest", "--source", f"{folder}/*.md", *one_shard]) == 2
    assert "['a.md'] (1 in all) are already live" in capsys.readouterr().err
    assert _unfinished(capsys, index) == []
    warnings, found = _search(capsys, index, "opera")
    assert warnings == [] and found == ["c.txt"]


def test_a_document_added_after_the_check_is_refused_by_the_commit(tmp_path, capsys, monkeypatch):
    """The ids are checked once the source is staged (above); a document another writer adds after that check (the
    service's upload, a script's ``Index.add``) is caught by the commit, under the index's lock. The added copy's
    docno is ``d2`` and the ingest's ``d2#0``: a check of docnos alone let both in."""
    import pyarrow as pa

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    assert _ingest(_write(tmp_path / "a.jsonl", [{"id": "d1", "text": "the quick brown fox"}]), index) == 0
    commit, added = Index.commit, []

    def another_writer_adds_first(self, infos, **kwargs):
        if not added:
            added.append(Index.open(self.path).add(pa.table({"docno": ["d2"], "doc_id": ["d2"],
                                                             "text": ["added by another writer"]})))
        return commit(self, infos, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(Index, "commit", another_writer_adds_first)
        assert _ingest(_write(tmp_path / "b.jsonl", [{"id": "d2", "text": "cats purr softly"}]), index) == 2
    assert "document(s) ['d2'] (1 in all) are already live" in capsys.readouterr().err
    assert sorted(Index.open(index).columns(["docno"])[1].column("docno").to_pylist()) == ["d1#0", "d2"]
    [record] = _unfinished(capsys, index)
    assert record["refused"]["field"] == "doc_id" and record["refused"]["advice"] == "fix the file or add --replace"


def test_a_metadata_type_conflict_is_reported_as_refused_without_replace(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    assert _ingest(_write(tmp_path / "a.jsonl", [{"id": "d1", "text": "bees", "year": 2020}]), index) == 0
    assert _ingest(_write(tmp_path / "c.jsonl", [{"id": "d2", "text": "ants", "year": "late"}]), index) == 2

    [record] = _unfinished(capsys, index)
    assert record["refused"]["field"] == "year" and record["refused"]["advice"] == "fix the file"
    assert main(["index", "info", str(index)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "unfinished ingestion" in x)
    assert "refused: shard" in line and "'year'" in line and "--replace" not in line.split("; then:")[0]


def test_a_refusal_whose_documents_came_in_since_by_another_path_is_no_longer_reported(tmp_path, capsys, caplog,
                                                                                          monkeypatch):
    """The file grown and moved: its run resumes the first path's source and is refused (an id added since); the
    same file with --replace comes in as a source of its own. The first source's refusal then named documents all
    in the index, and `index info` and every `tessera run` still warned that they were not."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    first = [{"id": f"d{i}", "text": f"document {i} about bees"} for i in range(3)]
    assert _ingest(_write(tmp_path / "a.jsonl", first), index) == 0
    added = tmp_path / "added.jsonl"
    _write(added, [{"id": "d4", "text": "document 4 about wasps, added alone"}])
    assert main(["index", "add", str(index), str(added)]) == 0
    grown = _write(tmp_path / "b.jsonl", first + [{"id": f"d{i}", "text": f"document {i} about ants"}
                                                  for i in range(3, 6)])
    assert _ingest(grown, index) == 2  # resumes a.jsonl's source; the shard of d4 is refused
    [record] = _unfinished(capsys, index)
    assert record["refused"]["field"] == "doc_id" and "'d4'" in record["refused"]["reason"]
    caplog.clear()
    assert _ingest(grown, index, "--replace") == 0  # the user is told that all of it is embedded again
    assert (f"the source starts with the documents of a source the index holds (last read from {grown}); with "
            "--replace they are ingested again, as a source of their own: every document is embedded again") \
        in caplog.text
    assert _unfinished(capsys, index) == []
    warnings, found = _search(capsys, index, "ants")
    assert warnings == [] and sorted(found) == ["d3", "d4", "d5"]  # d4 as the file has it
    assert len(Index.open(index)) == 6


def test_a_refusal_superseded_is_known_so_whatever_the_clocks_of_the_machines_that_wrote_it(tmp_path, capsys,
                                                                                            monkeypatch):
    """The same as above, with the refusal's file stamped two hours ahead of the ingesting process's clock (a file
    server's clock, or another node's, ahead of this one): the shards that came in after it were judged by their
    times against the file's, all older, and `index info` still named the refusal as an unfinished ingestion."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    first = [{"id": f"d{i}", "text": f"document {i} about bees"} for i in range(3)]
    assert _ingest(_write(tmp_path / "a.jsonl", first), index) == 0
    assert main(["index", "add", str(index), str(_write(tmp_path / "added.jsonl", [{"id": "d4", "text": "wasps"}]))]) \
        == 0
    grown = _write(tmp_path / "b.jsonl", first + [{"id": f"d{i}", "text": f"document {i} about ants"}
                                                  for i in range(3, 6)])
    assert _ingest(grown, index) == 2  # the shard of d4 is refused
    [refusal] = _unfinished(capsys, index)
    assert sorted(refusal["refused"]) == ["advice", "field", "reason", "shard"]  # what it keeps for this is its own
    [record] = [next(index.glob("_ingest/*/refused.json"))]
    ahead = time.time() + 2 * 3600
    os.utime(record, (ahead, ahead))
    assert _ingest(grown, index, "--replace") == 0
    assert _unfinished(capsys, index) == []
