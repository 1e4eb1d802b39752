"""``tessera run --out run.trec`` over a chunked index says how many lines it wrote: a document's passages are one
line of a TREC run, at its best passage's rank, and the command said "wrote 3176 rows" of a file of 1939 lines. A
real BM25-only index of long documents (chunked, no model), the command run in-process."""

from __future__ import annotations

import json

from flows.commands import main


def test_a_trec_out_of_passages_says_the_lines_it_wrote(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "long.jsonl"
    words = "honey bees gather nectar from flowers and store it in combs of wax".split()
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": " ".join(words[(i + j) % len(words)]
                                                                         for j in range(600))}) + "\n"
                              for i in range(4)))
    index, out = tmp_path / "idx", tmp_path / "run.trec"
    assert main(["ingest", "-s", str(corpus), "-i", str(index), "--no-dense", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["run", "bm25", "--index", str(index), "-q", "honey nectar", "--out", str(out), "--no-cache"]) == 0
    err = capsys.readouterr().err
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and {line.split()[2] for line in lines} == {"d0", "d1", "d2", "d3"}
    assert "wrote 4 lines (the documents of " in err and f"passage rows) to {out}" in err, err
    passages = int(err.split("the documents of ")[1].split()[0])
    assert passages > 4
    assert main(["run", "bm25", "--index", str(index), "-q", "honey nectar", "--out", str(tmp_path / "r.jsonl"),
                 "--no-cache"]) == 0
    assert f"wrote {passages} rows to {tmp_path / 'r.jsonl'}" in capsys.readouterr().err
