"""The benchmark's index key (``flows.bench.indices``): a dense index is keyed on what its encoder is (the weights'
fingerprint), not on how the spec names it. It hashed the reference string, so one model named by its name, by
its folder or by an alias built the same index two or three times. Real indices of 20 sample documents, embedded
with the packaged MiniLM; an index built under the key of before is still found, and a broken one is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from flows.bench import indices
from flows.spec import FlowSpec
from operators.models import DEFAULT_ENCODER, resolve_model_path

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def corpus(tmp_path) -> tuple[Path, str]:
    """20 sample documents and their sha256 (what the benchmark keys an index on with the settings)."""
    path = tmp_path / "corpus.jsonl"
    lines = (REPO / "data" / "sample" / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:20]
    path.write_text("".join(lines), encoding="utf-8")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def _dense(encoder: str) -> FlowSpec:
    return FlowSpec.parse({"name": "dense", "index_settings": {"encoder": encoder},
                           "steps": {"dense": {"op": "retrieve.dense", "params": {"k": 10}}}})


def _linked_copy(folder: Path, to: Path) -> Path:
    """The model's folder elsewhere: its files as symbolic links (the same weights, another path)."""
    shutil.copytree(folder, to, copy_function=os.symlink)
    return to


def _built(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


@pytest.mark.slow  # builds a dense index: the encoder loads (10-20 s on a shared machine)
def test_one_model_by_name_by_path_or_by_alias_is_one_index(tmp_path, corpus):
    path, sha = corpus
    root = tmp_path / "auto"
    folder = resolve_model_path(DEFAULT_ENCODER)
    copy = _linked_copy(folder, tmp_path / "minilm-copy")
    plans = {ref: indices.plan_index(_dense(ref), sha, root)
             for ref in (DEFAULT_ENCODER, str(folder), "minilm", str(copy))}
    assert len({plan.key for plan in plans.values()}) == 1, {ref: plan.key for ref, plan in plans.items()}
    assert indices.ensure_index(plans[DEFAULT_ENCODER], path, log=lambda _: None, progress=False) is True
    for ref in (str(folder), "minilm", str(copy)):  # found, not built again
        assert indices.ensure_index(indices.plan_index(_dense(ref), sha, root), path, progress=False) is False
    assert _built(root) == [plans[DEFAULT_ENCODER].key]

    # other weights are another index, whatever the folder is called
    (copy / "config.json").unlink()
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (copy / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 1e-6}), encoding="utf-8")
    assert indices.plan_index(_dense(str(copy)), sha, root).key != plans[DEFAULT_ENCODER].key


@pytest.mark.slow  # builds a dense index: the encoder loads (10-20 s on a shared machine)
def test_an_index_built_under_the_old_key_is_found_and_a_broken_one_is_built_anew(tmp_path, corpus):
    path, sha = corpus
    root = tmp_path / "auto"
    new = indices.plan_index(_dense(DEFAULT_ENCODER), sha, root)
    # the key of before: the corpus's sha256 and the settings JSON, the encoder by its reference
    old_key = hashlib.sha256(f"{sha}\n{new.settings_json}".encode()).hexdigest()[:32]
    old = indices.IndexPlan(key=old_key, path=root / old_key, dense=True, settings=new.settings,
                            settings_json=new.settings_json)
    assert old_key != new.key
    assert indices.ensure_index(old, path, log=lambda _: None, progress=False) is True

    found = indices.plan_index(_dense(DEFAULT_ENCODER), sha, root)
    assert (found.key, found.path) == (old_key, old.path)
    assert indices.ensure_index(found, path, progress=False) is False
    assert indices.identity(found).startswith(f"auto:{old_key}/g")

    (old.path / "manifest.json").unlink()  # marked built, but it no longer opens: built under the new key
    rebuilt = indices.plan_index(_dense(DEFAULT_ENCODER), sha, root)
    assert rebuilt.key == new.key
    assert indices.ensure_index(rebuilt, path, log=lambda _: None, progress=False) is True
    assert indices.ensure_index(indices.plan_index(_dense(DEFAULT_ENCODER), sha, root), path,
                                progress=False) is False


def test_a_bm25_only_index_keeps_its_key(tmp_path, corpus):
    """Without vectors the encoder does not count, and the key is the one of before (no index is rebuilt)."""
    _, sha = corpus
    spec = FlowSpec.parse({"name": "bm25", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 10}}}})
    plan = indices.plan_index(spec, sha, tmp_path)
    assert not plan.dense
    assert plan.key == hashlib.sha256(f"{sha}\n{plan.settings_json}".encode()).hexdigest()[:32]
