"""A benchmark's index built before BM25's 'cjk_bigrams' became the default (its key holds the settings, tokens
'unicode' then): after the upgrade `tessera bench` and `tessera train` built it again under the new key, a dense
one's embedding too, though text without Chinese, Japanese or Korean is cut alike. Such an index is used now; one
whose text has CJK is built again with 'cjk_bigrams', as a new index would be. Real BM25 indices of sample documents.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from flows.bench import indices
from flows.spec import FlowSpec
from operators.store.settings import IndexSettings

REPO = Path(__file__).resolve().parents[3]
BM25 = FlowSpec.parse({"name": "bm25", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 10}}}})


def _corpus(tmp_path: Path, extra: str = "") -> tuple[Path, str]:
    path = tmp_path / "corpus.jsonl"
    lines = (REPO / "data" / "sample" / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:20]
    path.write_text("".join(lines) + extra, encoding="utf-8")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _built_by_the_release_before(root: Path, corpus: Path, sha: str) -> indices.IndexPlan:
    """The index the release before this one built: keyed as it keyed a BM25 index, by the corpus's sha256 and the
    settings JSON, in which tokens was 'unicode'."""
    settings = indices.index_settings(BM25).model_copy(update={"tokens": "unicode"})
    settings_json = json.dumps(settings.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    key = hashlib.sha256(f"{sha}\n{settings_json}".encode()).hexdigest()[:32]
    plan = indices.IndexPlan(key=key, path=root / key, dense=False, settings=settings, settings_json=settings_json)
    assert indices.ensure_index(plan, corpus, log=lambda _: None, progress=False) is True
    return plan


def _bm25_files(plan: indices.IndexPlan) -> list[dict[str, str]]:
    manifest = json.loads((plan.path / "manifest.json").read_text(encoding="utf-8"))
    return [{name: digest for name, digest in shard["files"].items() if name.startswith("bm25")}
            for shard in manifest["shards"]]


def test_an_english_index_built_before_cjk_bigrams_is_used_and_cut_alike(tmp_path):
    corpus, sha = _corpus(tmp_path)
    root = tmp_path / "auto"
    old = _built_by_the_release_before(root, corpus, sha)
    plan = indices.plan_index(BM25, sha, root)
    assert plan.key == old.key and plan.settings.tokens == "unicode"
    assert indices.ensure_index(plan, corpus, log=lambda _: None, progress=False) is False  # not built again
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [old.key]
    # what it would build now cuts the same words: the same BM25 files, byte for byte
    fresh = indices.plan_index(BM25, sha, tmp_path / "fresh")
    assert fresh.settings.tokens == "cjk_bigrams" and fresh.key != old.key
    indices.ensure_index(fresh, corpus, log=lambda _: None, progress=False)
    assert _bm25_files(fresh) == _bm25_files(old)


def test_an_index_with_chinese_text_is_built_again_with_cjk_bigrams(tmp_path):
    doc = {"_id": "zh1", "title": "北京烤鸭", "text": "北京烤鸭是中国著名的菜肴。"}
    corpus, sha = _corpus(tmp_path, json.dumps(doc, ensure_ascii=True) + "\n")  # escaped, as BEIR files often are
    root = tmp_path / "auto"
    old = _built_by_the_release_before(root, corpus, sha)
    plan = indices.plan_index(BM25, sha, root)
    assert plan.key != old.key and plan.settings.tokens == "cjk_bigrams"
    assert indices.ensure_index(plan, corpus, log=lambda _: None, progress=False) is True
    assert IndexSettings.model_validate(json.loads(plan.settings_json)).tokens == "cjk_bigrams"


def test_a_spec_that_names_its_tokens_gets_them(tmp_path):
    corpus, sha = _corpus(tmp_path)
    root = tmp_path / "auto"
    _built_by_the_release_before(root, corpus, sha)
    named = FlowSpec.parse({**BM25.model_dump(exclude_none=True), "index_settings": {"tokens": "cjk_bigrams"}})
    assert indices.plan_index(named, sha, root).settings.tokens == "cjk_bigrams"


@pytest.mark.slow  # builds a dense index: the encoder loads (10-20 s on a shared machine)
def test_a_dense_english_index_built_before_cjk_bigrams_is_not_embedded_again(tmp_path):
    from operators.models.fingerprint import weights_fingerprint

    corpus, sha = _corpus(tmp_path)
    root = tmp_path / "auto"
    hybrid = FlowSpec.parse({"name": "hybrid", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"k": 10}}, "dense": {"op": "retrieve.dense", "params": {"k": 10}},
        "fused": {"op": "fuse.rrf", "inputs": ["bm25", "dense"]}}})
    settings = indices.index_settings(hybrid).model_copy(update={"tokens": "unicode"})
    dumped = {**settings.model_dump(mode="json"), "encoder": f"weights:{weights_fingerprint(settings.encoder)}"}
    key = hashlib.sha256(f"{sha}\n{json.dumps(dumped, sort_keys=True, separators=(',', ':'))}".encode()).hexdigest()
    old = indices.IndexPlan(key=key[:32], path=root / key[:32], dense=True, settings=settings,
                            settings_json=json.dumps(settings.model_dump(mode="json")))
    assert indices.ensure_index(old, corpus, log=lambda _: None, progress=False) is True
    plan = indices.plan_index(hybrid, sha, root)
    assert plan.path == old.path
    assert indices.ensure_index(plan, corpus, log=lambda _: None, progress=False) is False
