"""A small real BEIR dataset (a SciFact slice) built at test time, flow specs over it, a bench runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

N_QUERIES = 30
N_OTHER_DOCS = 1500


@pytest.fixture(scope="session")
def scifact_slice(shared_data, tmp_path_factory) -> Path:
    """30 SciFact test queries (file order) with their qrels, and a corpus of their
    relevant documents plus the first 1,500 others, in BEIR layout."""
    src = shared_data / "scifact"
    qrels_lines = (src / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    judged = {line.split("\t")[0] for line in qrels_lines[1:]}
    queries = [line for line in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if json.loads(line)["_id"] in judged][:N_QUERIES]
    qids = {json.loads(line)["_id"] for line in queries}
    kept_qrels = [line for line in qrels_lines[1:] if line.split("\t")[0] in qids]
    relevant = {line.split("\t")[1] for line in kept_qrels}
    corpus = []
    with open(src / "corpus.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i < N_OTHER_DOCS or json.loads(line)["_id"] in relevant:
                corpus.append(line.rstrip("\n"))
    root = tmp_path_factory.mktemp("data") / "scifact30"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (root / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("\n".join([qrels_lines[0], *kept_qrels]) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def flow_specs(scifact_slice, tmp_path_factory) -> dict[str, Path]:
    """Three BM25 flows over the slice's corpus that rank differently."""
    corpus = scifact_slice / "corpus.jsonl"
    folder = tmp_path_factory.mktemp("specs")
    bodies = {
        "title": f"steps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: '{corpus}', k: 100}}}}\n",
        "notitle": f"steps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: '{corpus}', k: 100, "
                   "index_title: false}}\n",
        "top5": f"steps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: '{corpus}', k: 100, "
                "index_title: false}}\n  top: {op: postprocess.reduce, params: {k: 5}}\n",
    }
    paths = {}
    for name, body in bodies.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(f"name: {name}\n{body}", encoding="utf-8")
    return paths


@pytest.fixture
def bench(monkeypatch, tmp_path, capsys):
    """``bench(*args)`` runs ``tessera bench ...`` through ``flows.commands.main`` in-process;
    returns (exit status, stdout, stderr). TESSERA_HOME is a fresh folder."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    from flows.commands import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = main(["bench", *map(str, args)])
        out = capsys.readouterr()
        return status, out.out, out.err

    return run
