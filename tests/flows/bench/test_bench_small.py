"""``tessera bench`` on five documents (BM25, no model): a rerun into the same ``--out`` leaves no plot of the
earlier one; a warning is a ``tessera: warning:`` line; a flow that fails is named beside its step."""

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


def test_a_warning_is_a_tessera_warning_line_with_progress_and_with_quiet(tessera, tmp_path):  # noqa: F811
    """docs/cli.md ("For scripts"): every warning is one line ``tessera: warning: ...``; bench's read ``warning:``
    (``tessera bench: warning:`` with ``--quiet``)."""
    data = beir_folder(tmp_path / "data")
    spec = tmp_path / "shallow.yaml"
    spec.write_text("name: shallow\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 2}}\n")
    common = ["--dataset", data, "--flow", f"shallow={spec}", "--k", "1,10", "--index-dir", tmp_path / "indices",
              "--no-mlflow"]
    for quiet in ([], ["--quiet"]):
        status, _, err = tessera("bench", *common, "--out", tmp_path / f"out{len(quiet)}", *quiet)
        warned = [line for line in err.splitlines() if "returned fewer than 10 results" in line]
        assert status == 0 and len(warned) == 1, err
        assert warned[0].startswith("tessera: warning: flow 'shallow' returned fewer than 10 results for "), err


BOOM = """
from operators.base import Operator
from operators.errors import OperatorError


class Boom(Operator):
    name = "mylab.boom"
    scope = "query"

    def reads(self):
        return ["qid"]

    def produces(self):
        return {}

    def transform(self, table):
        raise OperatorError("the lab's service is down", op=self.name, step=self.step_id)
"""


def test_a_step_that_fails_is_named_with_its_flow(tessera, tmp_path, plugin_module):  # noqa: F811
    plugin_module("boom_plugin", BOOM)
    ok, boom = tmp_path / "ok.yaml", tmp_path / "boom.yaml"
    ok.write_text("name: ok\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 10}}\n")
    boom.write_text("name: boom\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 10}}\n"
                    "  explode: {op: mylab.boom, inputs: [bm25]}\n")
    status, _, err = tessera("bench", "--dataset", beir_folder(tmp_path / "data"), "--flow", f"ok={ok}",
                             "--flow", f"explode={boom}", "--k", "1,10", "--out", tmp_path / "out",
                             "--index-dir", tmp_path / "indices", "--no-mlflow", "--quiet")
    assert status == 2
    assert err.splitlines()[-1] == ("tessera: error: flow 'explode', step 'explode', operator 'mylab.boom': "
                                    "the lab's service is down"), err
