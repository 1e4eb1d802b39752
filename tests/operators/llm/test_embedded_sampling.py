"""Sampling with the embedded model differs from one process to the next: llama-cpp-python derives each call's seed
from a fixed default, so every fresh process (a `tessera run`, a Serve replica) used to sample the same replies at
temperature 1. A seed the caller gives still repeats, and temperature 0 stays greedy. A seed of -1 (llama.cpp's
"draw one" once read as 32 bits) repeats too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


SAMPLE = """
import json, sys
from operators.llm import complete
prompt = "Write one sentence about the sea."
sampled = [complete(prompt, model="local", temperature=1.0, max_tokens=20).text for _ in range(3)]
seeded = complete(prompt, model="local", temperature=1.0, max_tokens=20, seed=7).text
minus_one = complete(prompt, model="local", temperature=1.0, max_tokens=20, seed=-1).text
greedy = complete(prompt, model="local", temperature=0, max_tokens=20).text
print(json.dumps({"sampled": sampled, "seeded": seeded, "minus_one": minus_one, "greedy": greedy}))
"""


def _in_a_fresh_process() -> dict:
    done = subprocess.run([sys.executable, "-c", SAMPLE], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two fresh processes, each loading the embedded model
def test_two_processes_sample_different_replies_unless_seeded_or_greedy():
    first, second = _in_a_fresh_process(), _in_a_fresh_process()
    assert all(text.strip() for text in first["sampled"] + second["sampled"])
    assert first["sampled"] != second["sampled"]  # 3 replies of 20 tokens each: equal by chance is negligible
    assert first["seeded"] == second["seeded"] and first["greedy"] == second["greedy"]
    assert first["minus_one"] == second["minus_one"]


@pytest.mark.parametrize("seed, engine_seed", [(7, 7), (-1, 2**32 - 2), (2**32 - 1, 0), (2**64 + 7, 8)])
def test_a_seed_is_one_llama_cpp_reads_as_a_seed(seed, engine_seed):
    """llama.cpp reads 32 bits of it and takes 2**32 - 1 as "draw one": -1 sampled anew each time."""
    from operators.llm.embedded import llama_options

    assert llama_options({"seed": seed, "temperature": 1.0})["seed"] == engine_seed
