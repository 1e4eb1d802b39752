"""``tessera bench`` run again into the same ``--out``: the plots are this run's, none left from the earlier one."""

from __future__ import annotations

from tests.flows.test_research_audit import beir_folder, home, tessera  # noqa: F401 - the fixtures


def test_a_rerun_with_another_baseline_leaves_no_plot_of_the_earlier_one(tessera, tmp_path):  # noqa: F811
    data = beir_folder(tmp_path / "data")
    flows = []
    for name, k in (("deep", 10), ("shallow", 2)):
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(f"name: {name}\nsteps:\n  bm25: {{op: retrieve.bm25, params: {{k: {k}}}}}\n")
        flows += ["--flow", f"{name}={spec}"]
    out = tmp_path / "out"
    common = ["--dataset", data, *flows, "--k", "1,10", "--out", out, "--index-dir", tmp_path / "indices",
              "--no-mlflow", "--quiet"]
    assert tessera("bench", *common)[0] == 0
    assert sorted(p.name for p in out.glob("*.png")) == ["deltas_deep.png", "metrics.png"]
    assert tessera("bench", *common, "--baseline", "shallow")[0] == 0
    assert sorted(p.name for p in out.glob("*.png")) == ["deltas_shallow.png", "metrics.png"]
    assert "deltas_deep" not in (out / "report.md").read_text()
