"""The failure ledger after a crash cut its last line short, or after damage: the next write starts on a line of its
own (its first event was read as part of the cut line, and lost with it: a failure no --retry-failed saw), and a
line that is no event is said once, naming the file and the line."""

from __future__ import annotations

import logging

from flows.ingestion.ledger import Failure, Ledger


def failure(n: int) -> Failure:
    return Failure.of_document("embed", {"doc_id": f"d{n}", "text": "x"}, "the encoder failed")


def test_a_write_after_a_cut_line_starts_its_own_line_and_the_cut_one_is_named(tmp_path, caplog):
    ledger = Ledger(tmp_path)
    ledger.record_attempt("s1", [failure(1)])
    data = ledger.path.read_bytes()
    ledger.path.write_bytes(data[:-10])  # the attempt line cut short: as a crash mid-write leaves it
    ledger.record_attempt("s2", [failure(2), failure(3)])
    with caplog.at_level(logging.WARNING, logger="tessera.ingest"):
        open_ids = [f.id for f in ledger.open_failures({"s1", "s2"})]
        ledger.open_failures({"s1", "s2"})  # read again: said once
    assert open_ids == ["doc:d2", "doc:d3"]  # s2's first failure was lost in the cut line before
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and f"{ledger.path} line 2 is not a ledger event" in warned[0]
    assert "--retry-failed will not retry" in warned[0]


def test_an_intact_ledger_says_nothing(tmp_path, caplog):
    ledger = Ledger(tmp_path)
    ledger.record_attempt("s1", [failure(1)])
    with caplog.at_level(logging.WARNING, logger="tessera.ingest"):
        assert [f.id for f in ledger.open_failures({"s1"})] == ["doc:d1"]
    assert caplog.records == []
