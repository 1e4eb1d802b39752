"""The SciFact subset of the quality test, written from ../shared/data at test time (only its ids are committed:
``scifact_subset.json``, derived by ``derive_scifact_subset.py``, which says how)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

SUBSET_IDS = Path(__file__).resolve().parent / "scifact_subset.json"


def write_subset(source: Path, ids: dict, dest: Path) -> Path:
    """A BEIR folder at ``dest`` with the lines of ``source`` (a BEIR folder) that ``ids`` names, byte for byte and
    in file order: ``ids["documents"]`` of corpus.jsonl, ``ids["queries"]`` of queries.jsonl and their judgements
    in qrels/test.tsv (with its header)."""
    docs, qids = set(ids["documents"]), set(ids["queries"])

    def keep(name: str, wanted: set[str]) -> list[str]:
        with open(source / name, encoding="utf-8") as f:
            return [line for line in f if line.strip() and json.loads(line)["_id"] in wanted]

    corpus, queries = keep("corpus.jsonl", docs), keep("queries.jsonl", qids)
    lines = (source / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    qrels = [lines[0]] + [line for line in lines[1:] if line.split("\t")[0] in qids]
    assert (len(corpus), len(queries)) == (len(docs), len(qids)), "an id of scifact_subset.json is not in the data"
    (dest / "qrels").mkdir(parents=True)
    (dest / "corpus.jsonl").write_text("".join(corpus), encoding="utf-8")
    (dest / "queries.jsonl").write_text("".join(queries), encoding="utf-8")
    (dest / "qrels" / "test.tsv").write_text("".join(qrels), encoding="utf-8")
    return dest


@pytest.fixture(scope="session")
def scifact_subset(shared_data, tmp_path_factory) -> Path:
    """The subset as a BEIR folder named ``scifact``; fails (asking for a re-derivation) if the source files are
    not those the ids were derived from."""
    ids = json.loads(SUBSET_IDS.read_text(encoding="utf-8"))
    source = shared_data / "scifact"
    for name, expected in ids["source_sha256"].items():
        actual = hashlib.sha256((source / name).read_bytes()).hexdigest()
        assert actual == expected, (f"{source / name} changed since scifact_subset.json was derived: rerun "
                                    "tests/quality/derive_scifact_subset.py and set the thresholds again")
    return write_subset(source, ids, tmp_path_factory.mktemp("quality-data") / "scifact")
