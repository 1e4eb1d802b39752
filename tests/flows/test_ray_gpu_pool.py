"""A step that asks for GPUs and no ``concurrency`` runs on as many actors as the cluster's GPUs hold, as
docs/executors.md says. Its pool took one block at a time per actor, which kept Ray Data's utilization at 100% at
most, below the 175% at which it adds an actor ("will not allow it to scale up", Ray's warning): the pool stayed at
the actors it started with, 3 here for 2 GPUs that hold 4 (the input's blocks over 16,384 rows each), and one for a
flow that starts at a source (one block, not cut: the cut counted the step's ``concurrency`` alone). Now the input is
cut for the actors the cluster holds and the pool starts with them. A Ray of its own in a child process, with 2
logical GPUs (no GPU is needed to place actors on them).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, sys, time
import pyarrow as pa, pyarrow.compute as pc
import ray
from flows.executors.ray_data import RayDataExecutor
from operators.analyze.word_count import WordCounter
from operators.registry import create
from operators.testing import sample_results
from tests.flows.ray_flows import flow_by_hand

TRACE = sys.argv[1]  # a global of __main__: it travels with the class (an actor's own sys.argv is Ray's)

class SlowCount(WordCounter):  # defined in __main__: the actors get it by value
    name = "test.slow_count"

    def transform(self, table):
        time.sleep(1.0)  # a model's call: long enough for Ray Data to see every actor busy
        with open(TRACE, "a") as trace:
            trace.write(f"{os.getpid()}\\n")
        return super().transform(table)

ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, logging_level="WARNING")
base = sample_results(3, 10)
table = pa.concat_tables([base.set_column(0, "qid", pc.binary_join_element_wise(base.column("qid"), f"-{i}", ""))
                          for i in range(1334)])  # 40,020 rows in 8 input blocks (3 actors before: 1 per 16,384 rows)
flow = flow_by_hand("gpu_pool", [("words", WordCounter({}), None), ("slow", SlowCount({"output_column": "n2"}), None)],
                    words={"batch_size": 5000}, slow={"num_gpus": 0.5})
result = RayDataExecutor(cache=None).run(flow, table)
assert result.table.num_rows == table.num_rows
os.rename(TRACE, TRACE + ".table")

# A flow that starts at a source: one block of 2,000 documents, cut for the 4 actors the GPUs hold
docs = os.path.join(os.path.dirname(TRACE), "docs.jsonl")
with open(docs, "w") as out:
    out.writelines(f'{{"_id": "d{i}", "text": "honey bees and gothic cathedrals {i}"}}\\n' for i in range(2000))
flow = flow_by_hand("gpu_source", [("docs", create("sources.jsonl", {"path": docs}), None),
                                   ("slow", SlowCount({"output_column": "n2"}), None)], slow={"num_gpus": 0.5})
assert RayDataExecutor(cache=None).run(flow).table.num_rows == 2000
"""


@pytest.mark.ray
@pytest.mark.slow  # a Ray of its own and about 10 s of sleeping calls
def test_a_gpu_step_without_concurrency_runs_on_every_actor_the_gpus_hold(tmp_path):
    (tmp_path / "run.py").write_text(SCRIPT, encoding="utf-8")
    trace = tmp_path / "trace"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "RAY_ADDRESS": "local",
           "TESSERA_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(trace)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    calls = Counter(Path(f"{trace}.table").read_text().split())
    assert len(calls) == 4, calls  # 2 GPUs at 0.5 an actor; 3 before (the pool it started with)
    calls = Counter(trace.read_text().split())
    assert len(calls) == 4, calls  # the source's one block cut for 4 actors; 1 before (one block, one actor)
    assert "will not allow it to scale up" not in done.stderr
    # the step's CPU (the operator's default 1) is left to Ray Data, which reserves it for a GPU map itself and
    # warned at each run that naming both "is experimental, and may result in scheduling or stability issues"
    assert "Specifying both num_cpus and num_gpus" not in done.stderr
