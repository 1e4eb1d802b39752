"""Sampling with the embedded model differs from one process to the next: llama-cpp-python derives each call's seed
from a fixed default, so every fresh process (a `tessera run`, a Serve replica) used to sample the same replies at
temperature 1. A seed the caller gives still repeats, and temperature 0 stays greedy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # two fresh processes, each loading the embedded model

SAMPLE = """
import json, sys
from operators.llm import complete
prompt = "Write one sentence about the sea."
sampled = [complete(prompt, model="local", temperature=1.0, max_tokens=20).text for _ in range(3)]
seeded = complete(prompt, model="local", temperature=1.0, max_tokens=20, seed=7).text
greedy = complete(prompt, model="local", temperature=0, max_tokens=20).text
print(json.dumps({"sampled": sampled, "seeded": seeded, "greedy": greedy}))
"""


def _in_a_fresh_process() -> dict:
    done = subprocess.run([sys.executable, "-c", SAMPLE], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_processes_sample_different_replies_unless_seeded_or_greedy():
    first, second = _in_a_fresh_process(), _in_a_fresh_process()
    assert all(text.strip() for text in first["sampled"] + second["sampled"])
    assert first["sampled"] != second["sampled"]  # 3 replies of 20 tokens each: equal by chance is negligible
    assert first["seeded"] == second["seeded"] and first["greedy"] == second["greedy"]
