"""The built-in summarize flow: on the fault server through the command line (the summary printed as prose and in
--json), and end to end with the embedded model on the sample index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
QUERY = "which insects make honey and pollinate flowers"


@pytest.mark.integration
def test_the_summary_reads_as_prose_and_travels_in_json(fault_models, sample_index, run_cli, tmp_path):
    spec = yaml.safe_load((REPO / "flows" / "specs" / "summarize.yaml").read_text())
    assert spec["steps"]["summary"]["op"] == "summarize.results"
    spec["steps"]["summary"]["params"]["model"] = "fault-ok"
    fault_models.reply = "Honey bees make honey and pollinate flowers."
    path = tmp_path / "summarize.yaml"
    path.write_text(yaml.safe_dump(spec))
    status, out = run_cli("run", str(path), "--index", str(sample_index),
                          "--queries", QUERY, "--quiet", "--no-cache")
    assert status == 0 and "summary: Honey bees make honey and pollinate flowers." in out
    assert "usage (summary):" in out and "LLM calls, tokens" in out
    status, out = run_cli("run", str(path), "--index", str(sample_index),
                          "--queries", QUERY, "--quiet", "--json", "--no-cache")
    result = json.loads(out)
    assert status == 0 and result["metadata"]["1"]["summary"] == fault_models.reply and len(result["rows"]) == 5
    prompt = fault_models.bodies[0]["messages"][-1]["content"]
    assert all(f"[{i}] " in prompt for i in range(1, 6)) and result["rows"][0]["title"] in prompt


@pytest.mark.slow
def test_summarize_runs_on_the_embedded_model(sample_index, run_cli):
    status, out = run_cli("run", "summarize", "--index", str(sample_index),
                          "--queries", QUERY, "--quiet", "--json", "--no-cache")
    meta = json.loads(out)["metadata"]["1"]
    assert status == 0 and "degraded" not in meta and meta["summary"].strip()
    assert 0 < meta["usage"]["summary"]["completion_tokens"] <= 160
