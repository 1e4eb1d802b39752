"""A step's key serializes its operator's ``cache_identity()`` once (``flows/cache_keys.py``): it was serialized
twice, once to check that no value in it is an object's address and once to hash it, for every step of every run.
The key is the same as before, so a cache stored before still hits. A real plugin operator whose identity holds a
value that counts how often it is written as text, and a real flow run twice over a real step cache."""

from __future__ import annotations

import hashlib
import importlib

from flows.cache_keys import OPERATOR_TAG_BYTES, _encode, operator_tag, step_explain, step_key
from operators.registry import create

PLUGIN = '''
import pyarrow as pa

from operators.base import Operator
from operators.tables import set_column

WRITTEN = []


class Revision:
    """A model revision with no JSON form of its own: JSON writes its text, counted here."""

    def __str__(self):
        WRITTEN.append(1)
        return "rev-7"


class Tagger(Operator):
    name = "mylab.tagger"

    def produces(self):
        return {"tag": "data"}

    def cache_identity(self):
        return {**super().cache_identity(), "revision": Revision()}

    def transform(self, table):
        return set_column(table, "tag", pa.array(["t"] * table.num_rows, pa.string()))
'''


def key_before(op) -> str:
    """The key as the code before this change computed it: the name's tag, then a digest of the encoded explain."""
    explain = {**step_explain(op), "identity": {**op.params.model_dump(mode="json"), "revision": "rev-7"}}
    return (operator_tag(op.name) + hashlib.blake2b(_encode(explain), digest_size=16 - OPERATOR_TAG_BYTES).digest()
            ).hex()


def test_a_step_key_writes_its_identity_once_and_is_the_key_it_was(plugin_module, tmp_path):
    module = importlib.import_module(plugin_module("keyed", PLUGIN))
    op = create("mylab.tagger", {})
    key = step_key(op)
    assert len(module.WRITTEN) == 1  # twice before
    assert key == key_before(op)
    for name, params in [("analyze.word_count", {}), ("postprocess.reduce", {"k": 3})]:
        builtin = create(name, params)
        before = operator_tag(name) + hashlib.blake2b(_encode(step_explain(builtin)),
                                                      digest_size=16 - OPERATOR_TAG_BYTES).digest()
        assert step_key(builtin) == before.hex()


def test_a_cache_stored_by_one_run_serves_the_next(plugin_module, tmp_path):
    from flows.api import Flow

    plugin_module("keyed", PLUGIN)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "Honey bees make honey."}\n')
    flow = Flow.load({"name": "f", "steps": {"bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus)}},
                                             "tag": {"op": "mylab.tagger"}}})
    first = flow.run("honey", cache=tmp_path / "cache")
    again = flow.run("honey", cache=tmp_path / "cache")
    assert (first.steps["tag"].hits, again.steps["tag"].hits, again.steps["tag"].units) == (0, 1, 1)
