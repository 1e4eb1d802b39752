"""One large document's ingestion says how far its embedding got. A 20 MB Markdown file is one document of about
27,000 chunks: off a terminal (a log, a pipe) ``tessera ingest`` printed ``ingest: 1 docs in 1 shard(s)`` and then
nothing for the 25 minutes of its embedding, since its heartbeat line waited for a document to be done, and the
bar on a terminal sat at 0/1. Now a heartbeat line names the chunks embedded of those to embed. Real text (the
sample corpus's articles joined into one file), a real encoder, small encoder batches; the heartbeat's period
lowered to 0 so every encoder call may print."""

from __future__ import annotations

import json
import re

import pytest

from flows.ingestion import ingest, progress
from tests.flows.test_ingest import SAMPLE


@pytest.mark.integration
def test_a_log_says_the_chunks_embedded_of_one_large_document(tmp_path, monkeypatch, capsys):
    texts = [json.loads(line)["text"] for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:40]]
    source = tmp_path / "book.txt"
    source.write_text("\n\n".join(texts), encoding="utf-8")
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    embed = {"op": "embed.sentence_transformer", "batch_size": 16}
    spec = {"name": "ingest", "steps": {"read": {"op": "sources.files", "params": {"path": "unused"}},
                                        "chunk": {"op": "preprocess.chunk",
                                                  "params": {"unit": "words", "size": 40, "overlap": 0}},
                                        "embed": embed}}
    report = ingest(source, tmp_path / "idx", executor="local", spec=spec, progress=True)
    assert report.docs == 1 and report.chunks > 64  # several encoder calls for its one document
    lines = capsys.readouterr().err.splitlines()
    # the document counts as done after its first encoder call; its chunks go on moving after it
    said = [line for line in lines if re.match(r"ingest: [01]/1 docs, shards 0/1, chunks \d+/\d+ embedded", line)]
    assert len(said) >= report.chunks // 16, lines  # a line per encoder call
    done = [tuple(map(int, re.search(r"chunks (\d+)/(\d+) embedded", line).groups())) for line in said]
    assert all(total == report.chunks for _, total in done), done
    assert [n for n, _ in done] == sorted(n for n, _ in done) and 0 < done[0][0] < report.chunks, done
    # one shard: the time left at the chunks' pace, where its one document's pace said nothing
    assert all(re.search(r"embedded \(\d+/s\), about \d+:\d\d:\d\d left$", line) for line in said[:-1]), said
