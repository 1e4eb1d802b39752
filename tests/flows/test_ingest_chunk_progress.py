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


@pytest.mark.integration
def test_a_terminals_bar_redraws_the_chunks_embedded_of_one_large_document(tmp_path, monkeypatch):
    """On a terminal the bar counted documents alone, and one document's counted after its first encoder call: it
    sat at 1/1 with no sign of the chunks. Its ``chunks=N/M`` is redrawn at every encoder call now. A real
    pseudo-terminal (80 columns) as stderr."""
    import fcntl
    import os
    import pty
    import struct
    import sys
    import termios
    import threading

    texts = [json.loads(line)["text"] for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:40]]
    source = tmp_path / "book.txt"
    source.write_text("\n\n".join(texts), encoding="utf-8")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    shown = bytearray()
    reader = threading.Thread(target=lambda: _drain(master, shown), daemon=True)
    reader.start()
    monkeypatch.setenv("TERM", "xterm")
    embed = {"op": "embed.sentence_transformer", "batch_size": 16}
    spec = {"name": "ingest", "steps": {"read": {"op": "sources.files", "params": {"path": "unused"}},
                                        "chunk": {"op": "preprocess.chunk",
                                                  "params": {"unit": "words", "size": 40, "overlap": 0}},
                                        "embed": embed}}
    with os.fdopen(slave, "w", encoding="utf-8", closefd=True) as terminal:
        monkeypatch.setattr(sys, "stderr", terminal)
        report = ingest(source, tmp_path / "idx", executor="local", spec=spec, progress=True)
        monkeypatch.undo()
    reader.join(timeout=10)
    os.close(master)
    drawn = {int(n) for n in re.findall(r"chunks=(\d+)/" + str(report.chunks), shown.decode(errors="replace"))}
    assert len(drawn) >= report.chunks // 16, shown.decode(errors="replace")[-2000:]  # one per encoder call
    assert report.chunks in drawn


def _drain(fd: int, into: bytearray) -> None:
    """What the terminal shows, read until it closes (a pty's buffer would block the writer when full)."""
    import os

    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the terminal's other end closed
            return
        if not data:
            return
        into.extend(data)
