"""A source is never cached: the runner reads its files afresh on every run (flows/runner.py, docs/caching.md), and
every place that reports whether a step is cached says so. ``tessera ops --json`` and ``tessera ops sources.jsonl``
said ``"cacheable": true`` (cached), as did a run's step record and ``tessera cache explain``. Real commands,
in-process, with the real step cache under a temporary ``$TESSERA_HOME``."""

from __future__ import annotations

import json

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from tests.flows.test_cli import tessera_in_process

DOCS = [{"_id": "d1", "title": "Bees", "text": "honey bees dance"},
        {"_id": "d2", "title": "Parrots", "text": "the kakapo is a flightless parrot"}]


def _write(path, docs) -> None:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))


def test_ops_reports_every_source_as_never_cached(tmp_path, monkeypatch, capsys):
    def tessera(*args: str) -> str:
        return tessera_in_process(monkeypatch, capsys, *args, home=tmp_path / "home").stdout

    infos = json.loads(tessera("ops", "--json"))
    sources = sorted(name for name, info in infos.items() if info["scope"] == "source")
    assert "sources.jsonl" in sources
    assert {name: infos[name]["cacheable"] for name in sources} == dict.fromkeys(sources, False)
    assert infos["postprocess.reduce"]["cacheable"] is True and infos["rerank.api"]["cacheable"] is False
    assert infos["generate.answer"]["cacheable"] == "if temperature == 0 or seed is set"
    assert "never cached" in tessera("ops", "sources.jsonl").splitlines()[0]


def test_a_source_step_run_with_the_cache_is_recorded_and_explained_as_not_cached_and_read_afresh(
        tmp_path, monkeypatch, capsys, cache):
    corpus = tmp_path / "docs.jsonl"
    _write(corpus, DOCS)
    steps = {"read": {"op": "sources.jsonl", "params": {"path": str(corpus)}}, "words": {"op": "analyze.word_count"}}
    spec = FlowSpec.parse({"name": "read", "steps": steps})
    first = LocalExecutor(cache=cache).run(spec)
    assert first.steps["read"].cached is False and first.steps["words"].cached is True
    _write(corpus, [*DOCS, {"_id": "d3", "text": "opera singers"}])
    again = LocalExecutor(cache=cache).run(spec)
    assert again.table.column("docno").to_pylist() == ["d1", "d2", "d3"], "the source was read again"
    assert again.steps["read"].cached is False

    flow = tmp_path / "read.json"
    flow.write_text(json.dumps({"name": "read", "steps": steps}))
    explained = json.loads(tessera_in_process(monkeypatch, capsys, "cache", "explain", str(flow), "--json",
                                              home=tmp_path / "home").stdout)
    assert {e["step"]: e["cached"] for e in explained["steps"]} == {"read": False, "words": True}
