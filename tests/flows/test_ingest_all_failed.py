"""An ingestion whose every record fails has one outcome on either executor: exit status 1 saying no document
was ingested, ``failures.jsonl`` holding each failed line, and the shard finished (empty) so that ``tessera index
info`` reports no unfinished ingestion. On Ray such a shard once left prepare as an empty block that never reached
the write stage: the run exited 0, wrote no ledger and left the ingestion unfinished.

The input is the new-user case: a plain text file named in the read step of the repository's ingest spec, run as
``tessera ingest --spec`` (BM25 only, so no encoder loads).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from flows.commands import main
from flows.ingestion.ledger import LEDGER_FILE, Ledger, finished_shards
from operators.store import Index

REPO = Path(__file__).resolve().parents[2]
LINES = "leave the light on\nand the door open\n"  # plain text: not one JSON record


def _spec(folder: Path) -> Path:
    """The repository's ingest spec, reading ``leave.txt`` (relative: from the working directory)."""
    spec = yaml.safe_load((REPO / "flows" / "specs" / "ingest.yaml").read_text())
    spec["steps"]["read"] = {"op": "sources.jsonl", "params": {"path": "leave.txt"}}
    path = folder / "leave.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _outcome(folder: Path, executor: str, capsys) -> dict:
    """What ``tessera ingest`` of ``leave.txt`` with ``executor`` did: its exit status and message, the ledger's
    records (without their attempt ids and times), and what ``tessera index info`` says of the ingestion."""
    index = folder / f"idx-{executor}"
    capsys.readouterr()
    status = main(["ingest", "--spec", str(_spec(folder)), "--index", str(index), "--executor", executor,
                   "--no-dense", "--quiet"])
    out = capsys.readouterr().err
    ledger = index / LEDGER_FILE
    records = [{k: v for k, v in json.loads(line).items() if k not in ("attempt", "time")}
               for line in ledger.read_text().splitlines()] if ledger.exists() else None
    assert main(["index", "info", str(index), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    return {"status": status, "nothing ingested": "no document was ingested: all 2 failed" in out,
            "ledger": records, "unfinished": info["unfinished_ingestions"], "counts": info["counts"],
            "finished": sorted(finished_shards(Index.open(index), Ledger(index))),
            "open": [f.id for f in Ledger(index).open_failures(finished_shards(Index.open(index)))]}


def test_an_ingestion_whose_every_record_fails_ends_as_on_the_local_executor(executor_kind, tmp_path, monkeypatch,
                                                                             capsys):
    (tmp_path / "leave.txt").write_text(LINES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    outcome = _outcome(tmp_path, executor_kind, capsys)
    source = str(tmp_path / "leave.txt")
    assert outcome["status"] == 1 and outcome["nothing ingested"], outcome
    assert [(r["event"], r.get("line"), r.get("raw"), r.get("stage")) for r in outcome["ledger"]] == [
        ("failure", 1, "leave the light on", "read"), ("failure", 2, "and the door open", "read"),
        ("attempt", None, None, None)]
    [shard] = {r["shard"] for r in outcome["ledger"]}
    assert outcome["ledger"][-1]["empty"] is True and outcome["finished"] == [shard]
    assert outcome["open"] == [f"read:{source}:1", f"read:{source}:2"]
    assert outcome["unfinished"] == [] and outcome["counts"]["shards"] == 0
    if executor_kind == "ray":  # the same input on the local executor: the same outcome, record for record
        assert outcome == _outcome(tmp_path, "local", capsys)


def test_the_python_call_whose_every_record_fails_raises_naming_the_first_failure(tmp_path, monkeypatch):
    """``flows.api.ingest`` returned an empty ``Index`` where ``tessera ingest`` exits 1: a script went on to
    search an index that holds nothing. Fixed, then retried, it returns the index with the documents."""
    from flows.api import ingest
    from flows.ingestion.errors import NothingIngestedError

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    source, index = tmp_path / "leave.jsonl", tmp_path / "idx"
    source.write_text(LINES)
    with pytest.raises(NothingIngestedError, match=r"no document was ingested: all 2 failed \(the first: ") as err:
        ingest(source, index, settings={"dense": False}, progress=False)
    assert err.value.report.failures == 2 and "retry_failed=True" in str(err.value), str(err.value)
    source.write_text("".join(json.dumps({"_id": f"d{i}", "text": line}) + "\n"
                              for i, line in enumerate(LINES.splitlines())))
    assert len(ingest(None, index, retry_failed=True, progress=False)) == 2
