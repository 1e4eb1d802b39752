"""A JSONL line that is not JSON is named by its file's line and its column. Of 500,000 lines, line 250,001 (a text
whose closing quote was lost) was said as 'many.jsonl, line 250001: not valid JSON (Invalid control character at:
line 1 column 32 (char 31))': json's own 'line 1' read as another line of the file. Now 'line 250001: not valid
JSON at column 32 (Invalid control character)'; the rest of the file is ingested. Real text (the sample corpus),
a real BM25-only ingest and its failure ledger."""

from __future__ import annotations

import json

from flows.ingestion import ingest
from tests.flows.test_ingest import SAMPLE

BM25_ONLY = {"dense": False}


def test_a_broken_line_is_named_by_its_line_and_column(tmp_path, caplog):
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:40]
    broken = '{"_id": "bad", "text": "broken \n'  # its quote never closed: the line ends inside the string
    source = tmp_path / "many.jsonl"
    source.write_text("\n".join(lines[:20]) + "\n" + broken + "\n".join(lines[20:]) + "\n", encoding="utf-8")
    report = ingest(source, tmp_path / "idx", settings=BM25_ONLY, executor="local", progress=False)
    assert (report.docs, report.failures) == (40, 1)  # the rest of the file is ingested
    events = [json.loads(line) for line in (tmp_path / "idx" / "failures.jsonl").read_text().splitlines()]
    failures = [(e["line"], e["error"]) for e in events if e["event"] == "failure"]
    assert failures == [(21, "not valid JSON at column 32 (Invalid control character)")]
    assert "many.jsonl, line 21: not valid JSON at column 32 (Invalid control character)" in caplog.text


def test_a_long_broken_line_is_kept_short_in_the_ledger_however_often_it_is_retried(tmp_path):
    """A 30 MB line that was not JSON went whole into failures.jsonl, and each --retry-failed that failed it again
    added it once more (31, 62, 93 MB). The ledger keeps its first RAW_CHARS characters and its length; a retry
    reads the line from its file."""
    from flows.ingestion.errors import IngestError
    from flows.ingestion.ledger import RAW_CHARS

    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:200]
    texts = " ".join(json.loads(line)["text"] for line in lines)
    assert len(texts) > 3 * RAW_CHARS
    broken = '{"_id": "long", "text": "' + " ".join(texts.split()).replace('"', "'")  # never closed
    source = tmp_path / "long.jsonl"
    source.write_text(lines[0] + "\n" + broken + "\n" + lines[1] + "\n", encoding="utf-8")
    ingest(source, tmp_path / "idx", settings=BM25_ONLY, executor="local", progress=False)
    for _ in range(2):
        try:
            ingest(None, tmp_path / "idx", executor="local", progress=False, retry_failed=True)
        except IngestError as err:  # nothing ingested: the line is still broken
            assert "long.jsonl, line 2: not valid JSON at column" in str(err), err
    ledger = tmp_path / "idx" / "failures.jsonl"
    failures = [e for e in map(json.loads, ledger.read_text().splitlines()) if e["event"] == "failure"]
    assert len(failures) == 3 and {(e["line"], e["raw_chars"]) for e in failures} == {(2, len(broken))}
    assert all(e["raw"] == broken[:RAW_CHARS] for e in failures)
    assert ledger.stat().st_size < len(broken)  # three failures of the line in less than the line
