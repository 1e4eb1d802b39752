"""An ingest that finds nothing to do says so: a source whose every shard is in the index, and a retry with no open
failures, printed only ``0 docs -> 0 chunks in 0 shard(s) (4 already done), 0.4 s, 0.00 docs/s``, which read as a
run that failed to find the documents. BM25 only, in this process."""

from __future__ import annotations

import json

import pytest

from flows.commands import main


def test_a_second_ingest_and_an_empty_retry_say_there_was_nothing_to_do(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"document number {i}"}) + "\n" for i in range(4)))
    command = ["ingest", "--source", str(source), "--index", "idx", "--shard-size", "2", "--executor", "local",
               "--no-dense", "--quiet"]
    assert main(command) == 0
    assert "nothing to do" not in capsys.readouterr().out
    assert main(command) == 0
    out = capsys.readouterr().out
    assert "0 docs -> 0 chunks in 0 shard(s) (2 already done)" in out  # the line scripts read stays as it was
    assert "nothing to do: every shard of this source is in the index already" in out
    assert main(["ingest", "--index", "idx", "--retry-failed", "--quiet"]) == 0
    assert f"nothing to retry: {tmp_path / 'home' / 'indices' / 'idx'} has no open failures" in capsys.readouterr().out


@pytest.mark.parametrize("caller", ["python", "cli"])
def test_a_rerun_says_its_source_was_staged_before_and_python_says_there_was_nothing_to_do(tmp_path, capsys,
                                                                                           monkeypatch, caller):
    """A rerun's progress lines (stderr off a terminal, as in a notebook or a log) said ``staging: 4 docs`` as if it
    staged the source again, and ``flows.api.ingest`` said nothing else where the CLI says there was nothing to do."""
    from flows.api import ingest

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"document number {i}"}) + "\n" for i in range(4)))
    index = tmp_path / "home" / "indices" / "idx"

    def run() -> None:
        if caller == "python":
            ingest(source, "idx", shard_size=2, settings={"dense": False})
        else:
            assert main(["ingest", "--source", str(source), "--index", "idx", "--shard-size", "2", "--no-dense"]) == 0

    run()
    assert "staging: 4 docs\n" in capsys.readouterr().err  # staged: as it was
    run()
    said = capsys.readouterr()
    assert "staging: 4 docs, staged before, the source unchanged\n" in said.err
    nothing = "nothing to do: every shard of this source is in the index already"
    assert f"{index}: {nothing}\n" in said.err if caller == "python" else nothing in said.out
