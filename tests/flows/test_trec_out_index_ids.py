"""``tessera run --out FILE.trec`` over an index holding a document id with whitespace: a TREC run cannot hold it,
so the command refuses before the flow runs (naming the id and the index), not after the whole run; ``.jsonl``
keeps such ids. The index is real (``tessera index add``, BM25 only), the command runs in this process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tessera(monkeypatch, capsys, tmp_path):
    from flows.commands import main

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.chdir(REPO)
        monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
        monkeypatch.delenv("TESSERA_DEBUG", raising=False)
        capsys.readouterr()
        status = main(list(args))
        out = capsys.readouterr()
        return status, out.out, out.err

    return run


def index_of(tmp_path: Path, tessera, *ids: str) -> Path:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"_id": i, "text": f"honey bees {n}"}) + "\n" for n, i in enumerate(ids)))
    index = tmp_path / "idx"
    status, _, err = tessera("index", "add", str(index), str(docs), "--no-dense")
    assert status == 0, err
    return index


def test_a_trec_out_over_an_index_with_a_spaced_id_is_refused_before_the_run(tmp_path, tessera):
    index = index_of(tmp_path, tessera, "d1", "a b", "d3")
    out = tmp_path / "r.trec"
    status, stdout, err = tessera("run", "bm25", "--index", str(index), "-q", "honey", "--no-cache", "--out", str(out))
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tessera: error: field '--out'"), err  # no step ran: no progress
    assert f"index {index} holds the document id 'a b'" in lines[0] and ".jsonl" in lines[0]
    assert not out.exists() and stdout == ""
    status, _, err = tessera("run", "bm25", "--index", str(index), "-q", "honey", "--no-cache", "--quiet",
                             "--out", str(tmp_path / "r.jsonl"))
    assert status == 0, err
    assert "a b" in {json.loads(line)["docno"] for line in (tmp_path / "r.jsonl").read_text().splitlines()}


def test_a_deleted_spaced_id_no_longer_stops_a_trec_out(tmp_path, tessera):
    """Only live ids count: once the document is deleted, the TREC run is written."""
    index = index_of(tmp_path, tessera, "d1", "a b")
    assert tessera("index", "delete", str(index), "--doc-id", "a b")[0] == 0
    out = tmp_path / "r.trec"
    status, _, err = tessera("run", "bm25", "--index", str(index), "-q", "honey", "--no-cache", "--quiet",
                             "--out", str(out))
    assert status == 0, err
    assert [line.split()[2] for line in out.read_text().splitlines()] == ["d1"]
