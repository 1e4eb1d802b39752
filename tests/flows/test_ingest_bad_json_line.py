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
