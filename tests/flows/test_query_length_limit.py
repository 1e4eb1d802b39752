"""A query over the limit (``MAX_QUERY_CHARS``, 10,000 characters: the service's ``max_query_chars``) is refused
before anything runs: ``tessera run`` names the file and line, ``Flow.run`` the query; ``TESSERA_MAX_QUERY_CHARS``
sets another limit, and a bad value is one line naming it. A 5 MB line used to be tokenised whole."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = "".join(f'{{"_id": "d{i}", "text": "honey bees and opera singers {i}"}}\n' for i in range(5))


@pytest.fixture
def spec(tmp_path) -> Path:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(TINY)
    path = tmp_path / "tiny.yaml"
    path.write_text(f"name: tiny\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {corpus}, k: 3}}}}\n")
    return path


@pytest.fixture
def tessera(monkeypatch, capsys, tmp_path):
    from flows.commands import main

    def run(*args: str) -> tuple[int, str]:
        monkeypatch.chdir(REPO)
        monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
        capsys.readouterr()
        status = main(list(args))
        return status, capsys.readouterr().err

    return run


def test_the_limit_is_the_services():
    from flows.query_limits import MAX_QUERY_CHARS
    from serve.service_settings import Limits

    assert Limits().max_query_chars == MAX_QUERY_CHARS == 10_000


def test_a_5_mb_query_line_is_refused_naming_its_line_before_the_run(tmp_path, spec, tessera, monkeypatch):
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\thoney bees\nq2\t" + "bees " * 1_000_000 + "\n")
    status, err = tessera("run", str(spec), "-q", str(queries), "--no-cache", "--out", str(tmp_path / "r.jsonl"))
    assert status == 2
    assert err.strip().splitlines() == [
        f"tessera: error: field '--queries': {queries}:2: query 'q2' has 4999999 characters, over the limit of 10000 "
        "for a query (a query is searched for, not read; TESSERA_MAX_QUERY_CHARS sets another)"], err
    assert not (tmp_path / "r.jsonl").exists()
    (tmp_path / "q.txt").write_text("honey\n" + "b" * 10_001 + "\n")
    status, err = tessera("run", str(spec), "-q", str(tmp_path / "q.txt"), "--no-cache")
    assert status == 2 and f"{tmp_path / 'q.txt'}:2: query '2' has 10001 characters" in err, err
    (tmp_path / "q.txt").write_text("honey\n" + "b" * 10_000 + "\n")  # at the limit: run
    assert tessera("run", str(spec), "-q", str(tmp_path / "q.txt"), "--no-cache", "--quiet", "--json")[0] == 0
    monkeypatch.setenv("TESSERA_MAX_QUERY_CHARS", "5")
    status, err = tessera("run", str(spec), "-q", "honey bees", "--no-cache")
    assert status == 2 and "the query has 10 characters, over the limit of 5" in err, err
    monkeypatch.setenv("TESSERA_MAX_QUERY_CHARS", "ten")
    status, err = tessera("run", str(spec), "-q", "honey", "--no-cache")
    assert status == 2 and err.strip().splitlines() == [
        "tessera: error: TESSERA_MAX_QUERY_CHARS must be a whole number, 1 or more (got 'ten')"], err


def test_flow_run_refuses_a_query_over_the_limit(spec):
    from flows.api import Flow
    from operators.errors import SpecError

    flow = Flow.load(str(spec))
    with pytest.raises(SpecError, match=r"query '2' \(row 2\) has 20000 characters, over the limit of 10000"):
        flow.run(["honey", "b" * 20_000])
    assert flow.run("honey bees").table.num_rows == 3
