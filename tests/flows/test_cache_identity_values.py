"""A plugin's ``cache_identity()`` holding a value whose text is another in each process (``flows/cache_keys.py``):
a function or a loaded model (its address) gave its step a new key in every run, so it was never found in the step
cache and nothing said so; a set of texts, Python's salted string hashes another order, so a new process missed.
The plugin is a real module named in ``TESSERA_OPERATORS``, run in a real flow with a real step cache, and the keys
computed in real processes of their own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from operators.errors import OperatorError

PLUGIN = '''
import pyarrow as pa

from operators.base import Operator
from operators.tables import set_column


class Tagger(Operator):
    """Tag each row, keyed by IDENTITY."""

    name = "mylab.tagger"

    def produces(self):
        return {"tag": "data"}

    def cache_identity(self):
        return {**super().cache_identity(), "extra": IDENTITY}

    def transform(self, table):
        return set_column(table, "tag", pa.array(["t"] * table.num_rows, pa.string()))
'''

WORDS = "{'honey', 'bees', 'opera', 'wasps', 'flowers', 'nectar', 'drama', 'singers'}"


def test_a_function_in_cache_identity_is_refused_naming_the_step(plugin_module, tmp_path):
    from flows.api import Flow

    plugin_module("keyed", PLUGIN.replace("IDENTITY", "lambda value: value"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "Honey bees make honey."}\n')
    flow = Flow.load({"name": "f", "steps": {"bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus)}},
                                             "tag": {"op": "mylab.tagger"}}})
    with pytest.raises(OperatorError) as err:
        flow.run("honey", cache=tmp_path / "cache")
    assert (err.value.step, err.value.op) == ("tag", "mylab.tagger")
    assert err.value.message.startswith("its cache_identity() holds a function <function Tagger.cache_identity."
                                        "<locals>.<lambda> at 0x...>, whose text is another in each process, so the "
                                        "step would never be found in the step cache: return what decides the output "
                                        "as text")
    assert flow.run("honey").table.column("tag").to_pylist() == ["t"]  # without the cache it runs


@pytest.mark.process
def test_a_set_in_cache_identity_gives_one_key_in_every_process(plugin_module, tmp_path):
    module = plugin_module("keyed", PLUGIN.replace("IDENTITY", WORDS))
    script = ("from flows.cache_keys import step_key\nfrom operators.registry import create\n"
              "print(step_key(create('mylab.tagger', {})))\n")
    keys = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "TESSERA_OPERATORS": module,
               "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugins"), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        keys.add(done.stdout.strip())
    assert len(keys) == 1, keys
