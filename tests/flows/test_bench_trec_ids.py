"""``tessera bench`` over a built index that holds a document id a TREC run cannot hold (one with a space, added to
the benchmark's index by ``tessera index add``): refused before the flow runs, naming the flow, the index and the id,
as ``tessera run --out x.trec`` refuses it (``flows.trec_run.check_index_ids``). Before, the flow ran and the
benchmark failed writing its ``OUT/runs/*.trec``. The corpus's own ids are checked when the dataset is read."""

from __future__ import annotations

import json

import pytest

from flows.commands import main


@pytest.fixture
def dataset(tmp_path, monkeypatch):
    """A three-document BEIR folder with one judged query; ``$TESSERA_HOME`` in ``tmp_path``."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    root = tmp_path / "ds"
    (root / "qrels").mkdir(parents=True)
    docs = {"d1": "honey bees make honey", "d2": "bees and flowers", "d3": "opera singers"}
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in docs.items()))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "honey bees"}) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return root


@pytest.mark.slow  # two benchmarks in this process: ir_measures, statsmodels and matplotlib load (several seconds)
def test_bench_refuses_a_spaced_id_in_its_index_before_the_flow_runs(dataset, tmp_path, capsys):
    bench = ["bench", "--dataset", str(dataset), "--flow", "bm25", "--no-mlflow", "--no-cache", "--quiet"]
    assert main([*bench, "--out", str(tmp_path / "first")]) == 0, capsys.readouterr().err
    index = next(p for p in (tmp_path / "home" / "indices" / "auto").iterdir() if p.is_dir())
    added = tmp_path / "added.jsonl"
    added.write_text(json.dumps({"_id": "a b", "text": "honey bees all day"}) + "\n")
    assert main(["index", "add", str(index), str(added), "--no-dense"]) == 0
    capsys.readouterr()
    status = main([*bench, "--out", str(tmp_path / "second")])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith(f"tessera: error: field '--flow': flow 'bm25': index {index} holds the document id 'a b', "
                          "which a TREC run cannot hold"), err
    assert len(err.strip().splitlines()) == 1  # no step ran: no progress
    assert not list((tmp_path / "second").glob("runs/*"))  # no run saved, no TREC file begun
