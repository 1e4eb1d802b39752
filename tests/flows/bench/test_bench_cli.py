"""``tessera bench`` end to end on a real SciFact slice, through ``flows.commands.main``."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

# ir_measures, scipy and statsmodels (the references) are imported where they are used: make test-fast
# collects this module (marked data) without running it.
pytestmark = pytest.mark.data

KS = "1,5,10,100"
SPECS = Path(__file__).resolve().parents[3] / "flows" / "specs"


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def ir_qrels(dataset: Path) -> list:
    import ir_measures

    lines = (dataset / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [ir_measures.Qrel(q, d, int(r)) for q, d, r in (line.split("\t") for line in lines)]


@pytest.mark.slow
def test_bench_end_to_end_metrics_match_ir_measures_on_the_saved_runs(bench, scifact_slice, flow_specs, tmp_path):
    import ir_measures

    out = tmp_path / "out"
    top5 = str(flow_specs["top5"])  # a spec file alone: the flow is named after the file
    status, stdout, stderr = bench("--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}",
                                   "--flow", f"notitle={flow_specs['notitle']}", "--flow", top5,
                                   "--k", KS, "--out", out)
    assert status == 0, stderr
    assert "title" in stdout and "report:" in stdout
    assert "fewer than 100 results" in stderr  # top5 keeps 5 rows a query: the depth warning
    assert_marks_as_significance(stdout, out, "title", ("notitle", "top5"))
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) == {"title", "notitle", "top5"}
    bench_info = json.loads((out / "bench.json").read_text())
    qrels = ir_qrels(scifact_slice)
    measures = [ir_measures.parse_measure(m) for m in ("nDCG@10", "RR@10", "AP@100", "P@5", "R@100", "nDCG@1")]
    for flow, info in bench_info["flows"].items():
        run = pq.read_table(info["run_file"])
        scored = [ir_measures.ScoredDoc(q, d, -float(r)) for q, d, r in
                  zip(run["qid"].to_pylist(), run["docno"].to_pylist(), run["rank"].to_pylist())]
        expected = ir_measures.calc_aggregate(measures, qrels, scored)
        for m in measures:
            assert metrics[flow][str(m)] == pytest.approx(expected[m], abs=1e-12), (flow, m)
    # The title flow ranks differently from the others (the comparison is not vacuous).
    assert metrics["title"]["nDCG@10"] != metrics["notitle"]["nDCG@10"]
    assert metrics["top5"]["R@100"] < metrics["notitle"]["R@100"]
    # Every output is there; per_query holds every flow x query x measure.
    for name in ("metrics.csv", "per_query.parquet", "significance.csv", "report.md", "metrics.png",
                 "deltas_title.png"):
        assert (out / name).stat().st_size > 0, name
    per_query = pq.read_table(out / "per_query.parquet")
    assert per_query.num_rows == 3 * 30 * 7 * 4
    # Each row names its query: the text queries.jsonl gives its qid.
    texts = {q["_id"]: q["text"] for q in map(json.loads, (scifact_slice / "queries.jsonl").read_text().splitlines())}
    assert per_query.column_names == ["flow", "qid", "query", "measure", "value"]
    assert [texts[q] for q in per_query["qid"].to_pylist()] == per_query["query"].to_pylist()
    assert len(set(per_query["query"].to_pylist())) == 30
    report = (out / "report.md").read_text()
    assert "![metrics](metrics.png)" in report and "| top5 |" in report
    # MLflow: one run per flow with the measures as metrics (the default store, --out/mlflow.db).
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    experiment = client.get_experiment_by_name(f"tessera-bench-{scifact_slice.name}")
    logged = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert set(logged) == {"title", "notitle", "top5"}
    assert logged["top5"].data.metrics["nDCG_at_10"] == pytest.approx(metrics["top5"]["nDCG@10"])
    assert {a.path for a in client.list_artifacts(logged["title"].info.run_id)} >= {"report.md", "metrics.png"}


def assert_marks_as_significance(stdout: str, out: Path, baseline: str, flows: tuple[str, ...]) -> list[dict]:
    """The summary's ▲/▼ in each flow's row are what significance.csv finds at the headline cutoff (10) against
    ``baseline``, as the report marks them; returns those significant rows."""
    significant = [r for r in read_csv(out / "significance.csv") if r["baseline"] == baseline
                   and r["measure"].endswith("@10") and float(r["p_corrected"]) < 0.05]
    rows = {line.split("│")[1].strip(): line for line in stdout.splitlines() if line.count("│") > 2}
    for flow in flows:
        for mark, better in (("▲", True), ("▼", False)):
            expected = sum(r["flow"] == flow and (float(r["delta"]) > 0) is better for r in significant)
            assert rows[flow].count(mark) == expected, (flow, mark, rows[flow], significant)
    return significant


@pytest.mark.slow
def test_the_summary_marks_a_flow_significantly_worse_than_the_baseline(bench, scifact_slice, flow_specs, tmp_path):
    elsewhere = tmp_path / "elsewhere.jsonl"  # documents of no query's judgements: every measure 0
    elsewhere.write_text("".join(f'{{"_id": "x{i}", "text": "cell biology protein gene {i}"}}\n' for i in range(20)))
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(f"name: wrong\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: '{elsewhere}'}}}}\n")
    status, stdout, stderr = bench("--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}",
                                   "--flow", wrong, "--k", "10", "--no-mlflow", "--out", tmp_path / "out")
    assert status == 0, stderr
    significant = assert_marks_as_significance(stdout, tmp_path / "out", "title", ("wrong",))
    assert {r["measure"] for r in significant} >= {"nDCG@10", "R@10"} and "▼" in stdout, significant
    assert "▲/▼: significantly better/worse than title (corrected p < 0.05)." in stdout


@pytest.mark.slow
def test_significance_pairs_by_qid_and_leaves_the_baseline_out_of_the_correction(
        bench, scifact_slice, flow_specs, tmp_path):
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    args = ["--flow", f"title={flow_specs['title']}", "--flow", f"notitle={flow_specs['notitle']}",
            "--flow", f"top5={flow_specs['top5']}", "--k", KS, "--no-mlflow", "--quiet"]
    assert bench("--dataset", scifact_slice, *args, "--out", tmp_path / "a")[0] == 0
    # The same dataset with its queries file shuffled, every flow rerun.
    shuffled = tmp_path / "shuffled"
    shutil.copytree(scifact_slice, shuffled)
    lines = (shuffled / "queries.jsonl").read_text().splitlines()
    random.Random(7).shuffle(lines)
    (shuffled / "queries.jsonl").write_text("\n".join(lines) + "\n")
    assert bench("--dataset", shuffled, *args, "--no-cache", "--out", tmp_path / "b")[0] == 0
    first, second = read_csv(tmp_path / "a" / "significance.csv"), read_csv(tmp_path / "b" / "significance.csv")
    assert len(first) == len(second) == 2 * 7 * 4  # 2 flows against the baseline, 7 measures, 4 cutoffs
    for x, y in zip(first, second):
        assert (x["flow"], x["measure"]) == (y["flow"], y["measure"])
        assert x["p"] == y["p"] and x["p_corrected"] == y["p_corrected"]
    assert {r["flow"] for r in first} == {"notitle", "top5"} and {r["baseline"] for r in first} == {"title"}

    # p: scipy's paired t-test on the per-query values aligned by qid.
    pq_table = pq.read_table(tmp_path / "b" / "per_query.parquet").to_pylist()
    values: dict = {}
    for row in pq_table:
        values.setdefault((row["flow"], row["measure"]), {})[row["qid"]] = row["value"]
    checked = 0
    for measure in ("nDCG@10", "R@100", "P@5"):
        rows = {r["flow"]: r for r in first if r["measure"] == measure}
        ps = []
        for flow in ("notitle", "top5"):
            base, other = values[("title", measure)], values[(flow, measure)]
            qids = sorted(base)
            a, b = np.array([base[q] for q in qids]), np.array([other[q] for q in qids])
            expected = stats.ttest_rel(b, a).pvalue if np.any(a != b) else 1.0  # no difference: p = 1
            assert float(rows[flow]["p"]) == pytest.approx(expected, rel=1e-9)
            ps.append(float(rows[flow]["p"]))
        # Holm over exactly the two non-baseline comparisons; with the baseline in the
        # family (its self-comparison, p = 1) the numbers would differ.
        holm = multipletests(ps, method="holm")[1]
        assert [float(rows[f]["p_corrected"]) for f in ("notitle", "top5")] == pytest.approx(list(holm), rel=1e-9)
        with_baseline = multipletests(ps + [1.0], method="holm")[1][:2]
        if min(ps) < 0.5:
            assert not np.allclose(holm, with_baseline)
            checked += 1
    assert checked  # at least one measure where leaving the baseline out changes the result


def test_runs_are_cached_until_the_qrels_change_and_resume_after_an_interruption(
        bench, scifact_slice, flow_specs, tmp_path):
    dataset = tmp_path / "ds"
    shutil.copytree(scifact_slice, dataset)
    out = tmp_path / "out"
    common = ["--dataset", dataset, "--k", KS, "--no-mlflow", "--quiet", "--out", out]

    def flows_info():
        return json.loads((out / "bench.json").read_text())["flows"]

    # "Interrupted" after the first flow: only it ran.
    assert bench(*common, "--flow", f"title={flow_specs['title']}")[0] == 0
    first = flows_info()["title"]
    assert first["cached"] is False
    mtime = os.stat(first["run_file"]).st_mtime_ns
    # Resume with both flows: the finished one is not rerun.
    both = ["--flow", f"title={flow_specs['title']}", "--flow", f"notitle={flow_specs['notitle']}"]
    assert bench(*common, *both)[0] == 0
    info = flows_info()
    assert info["title"]["cached"] is True and info["notitle"]["cached"] is False
    assert info["title"]["run_file"] == first["run_file"] and os.stat(first["run_file"]).st_mtime_ns == mtime
    before = json.loads((out / "metrics.json").read_text())
    # Same qrels again: everything cached, same numbers.
    assert bench(*common, *both)[0] == 0
    assert all(f["cached"] for f in flows_info().values())
    assert json.loads((out / "metrics.json").read_text()) == before
    # Changed qrels (one judgement dropped): every flow reruns, under a new key.
    qrels = dataset / "qrels" / "test.tsv"
    lines = qrels.read_text().splitlines()
    qrels.write_text("\n".join(lines[:-1]) + "\n")
    assert bench(*common, *both)[0] == 0
    info = flows_info()
    assert not info["title"]["cached"] and not info["notitle"]["cached"]
    assert info["title"]["key"] != first["key"] and os.stat(first["run_file"]).st_mtime_ns == mtime
    # --no-cache reruns even when nothing changed.
    assert bench(*common, "--no-cache", "--flow", f"title={flow_specs['title']}")[0] == 0
    assert flows_info()["title"]["cached"] is False


@pytest.mark.parametrize("args, needle", [
    (["--flow", "title=no-such-flow"], "bad --flow value 'title=no-such-flow'"),
    (["--flow", "=x"], "bad --flow value '=x'"),
    (["--flow", "a b=demo"], "bad --flow value 'a b=demo'"),
    (["--flow", "demo", "--flow", "demo"], "used twice"),
    (["--flow", "demo", "--flow", str(SPECS / "demo.yaml")], "the name 'demo' is used twice"),  # named after the file
    (["--flow", "demo", "--baseline", "other"], "--baseline 'other'"),
    (["--flow", "demo", "--k", "10,x"], "bad --k value '10,x'"),
    (["--flow", "demo", "--split", "dev"], "no qrels file"),
    (["--flow", "demo", "--cache-dir", str(SPECS / "demo.yaml")], "demo.yaml is a file, not a folder"),
    (["--flow", "bm25", "--index-dir", str(SPECS / "demo.yaml")], "field '--index-dir': cannot make --index-dir"),
    (["--flow", "demo", "--mlflow-uri", "sqlite:///x.db", "--no-mlflow"], "--mlflow-uri and --no-mlflow: give one"),
    (["--flow", "demo", "--no-cache", "--cache-dir", "c"], "--no-cache and --cache-dir: give one"),  # c was ignored
])
def test_bad_arguments_exit_2_with_one_line_naming_them(bench, scifact_slice, tmp_path, args, needle):
    status, _, stderr = bench("--dataset", scifact_slice, "--out", tmp_path / "out", "--no-mlflow", *args)
    lines = stderr.strip().splitlines()
    assert status == 2 and len(lines) == 1, stderr
    assert lines[0].startswith("tessera: error: ") and needle in lines[0], lines[0]
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_missing_dataset_folder_exits_2_naming_it(bench, tmp_path):
    missing = tmp_path / "nowhere"
    status, _, stderr = bench("--dataset", missing, "--flow", "demo", "--out", tmp_path / "out")
    lines = stderr.strip().splitlines()
    assert status == 2 and len(lines) == 1, stderr
    assert f"dataset folder '{missing}' does not exist" in lines[0]
    status, _, stderr = bench("--dataset", SPECS / "demo.yaml", "--flow", "demo", "--out", tmp_path / "out")
    assert status == 2 and "demo.yaml' is a file; give the BEIR folder" in stderr, stderr


def test_a_missing_relative_dataset_says_where_it_was_read_from(tmp_path, monkeypatch):
    """A recipe's ``../shared/data/...`` from a clone elsewhere: the folder read is the working directory's."""
    from flows.bench.dataset import load_dataset
    from flows.bench.errors import BenchError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchError) as err:
        load_dataset("../shared/data/scifact")
    assert err.value.message == (f"dataset folder '../shared/data/scifact' does not exist (a relative path, read "
                                 f"from {tmp_path})")


def test_python_m_flows_bench_is_the_same_command(scifact_slice, tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, "-m", "flows.bench", "--dataset", str(scifact_slice), "--flow", "x=nope",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=120,
                          cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "bad --flow value 'x=nope'" in proc.stderr


def test_indices_are_built_from_the_corpus_once_and_injected(bench, scifact_slice, tmp_path):
    spec = tmp_path / "bm25.yaml"
    spec.write_text("name: bm25\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 100}}\n")  # index left unset
    common = ["--dataset", scifact_slice, "--flow", f"idx={spec}", "--k", KS, "--no-mlflow", "--quiet"]
    assert bench(*common, "--out", tmp_path / "a")[0] == 0
    info = json.loads((tmp_path / "a" / "bench.json").read_text())["flows"]["idx"]
    index = Path(info["index"]["path"])
    assert info["index"]["built"] is True and info["index"]["dense"] is False
    assert index.parent == tmp_path / "home" / "indices" / "auto" and (index / "manifest.json").is_file()
    from operators.store import Index

    assert len(Index.open(index)) >= 1500 and Index.open(index).settings.dense is False
    # Another benchmark over the same corpus reuses the index (keyed by content), and the
    # run it made is as good as the in-memory BM25 over the same corpus.
    assert bench(*common, "--no-cache", "--out", tmp_path / "b")[0] == 0
    again = json.loads((tmp_path / "b" / "bench.json").read_text())["flows"]["idx"]
    assert again["index"]["built"] is False and again["index"]["key"] == info["index"]["key"]
    assert json.loads((tmp_path / "b" / "metrics.json").read_text())["idx"]["nDCG@10"] > 0.5


def test_min_relevance_is_an_option_recorded_with_the_results(bench, scifact_slice, flow_specs, tmp_path):
    # SciFact judges every relevant document 1: at --min-relevance 2 no query has a relevant document.
    common = ["--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}", "--k", "1,10", "--no-mlflow"]
    status, _, stderr = bench(*common, "--min-relevance", "2", "--out", tmp_path / "two")
    assert status == 0, stderr
    assert "30 of 30 queries have no document judged 2 or above" in stderr
    info = json.loads((tmp_path / "two" / "bench.json").read_text())
    assert info["options"]["min_relevance"] == 2 and "judged 2 or above" in (tmp_path / "two" / "report.md").read_text()
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())["title"]
    assert bench(*common, "--quiet", "--out", tmp_path / "one")[0] == 0
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())["title"]
    assert two["P@10"] == two["RR@10"] == two["PerfectRecall@10"] == 0.0 < one["P@10"]
    assert two["nDCG@10"] == one["nDCG@10"] > 0.5  # nDCG takes the grades as they are
    with pytest.raises(SystemExit) as refused:  # argparse's usage error, in-process
        bench(*common, "--min-relevance", "0", "--out", tmp_path / "zero")
    assert refused.value.code == 2


def test_cache_dir_holds_the_step_cache_and_a_second_benchmark_hits_it(bench, scifact_slice, flow_specs, tmp_path,
                                                                       capsys):
    from flows.commands import main

    cache = tmp_path / "steps"
    common = ["--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}", "--k", KS, "--no-mlflow",
              "--quiet", "--cache-dir", cache]

    def last_run(out) -> tuple[bool, dict]:
        """Whether the benchmark into ``out`` took its saved run, and the step cache's record of the bm25 step."""
        cached = json.loads((out / "bench.json").read_text())["flows"]["title"]["cached"]
        assert main(["cache", "explain", str(flow_specs["title"]), "--cache-dir", str(cache), "--json"]) == 0
        return cached, json.loads(capsys.readouterr().out)["steps"][0]["last_run"]

    assert bench(*common, "--out", tmp_path / "a")[0] == 0
    assert (cache / "tessera-cache.json").is_file() and any((cache / "data").iterdir())
    assert not (tmp_path / "home" / "cache").exists()  # nothing in the default cache
    cached, first = last_run(tmp_path / "a")
    assert cached is False and first["units"] == 30 and first["hits"] == 0
    # Another --out has no saved run: the flow runs again, every query served by the step cache.
    assert bench(*common, "--out", tmp_path / "b")[0] == 0
    cached, second = last_run(tmp_path / "b")
    assert cached is False and second["units"] == second["hits"] == 30
    # ... and its seconds say they were a read of the step cache, not the flow's work
    hits = {out: json.loads((tmp_path / out / "bench.json").read_text())["flows"]["title"]["step_cache_hits"]
            for out in ("a", "b")}
    assert hits == {"a": 0.0, "b": 1.0}  # a computed every unit: no share to report beside its seconds
    assert "(100% from the step cache)" in (tmp_path / "b" / "report.md").read_text()
    assert "from the step cache" not in (tmp_path / "a" / "report.md").read_text()


def test_a_flow_whose_step_fell_back_is_said_and_its_run_is_not_reused(bench, tmp_path):
    """A reranker whose service is down keeps the first stage's ranking for every query: the benchmark reported
    the fallback's figures as the reranker's, and reused the run once the service was up."""
    data = tmp_path / "tiny"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in (
        ("d1", "honey bees make honey"), ("d2", "ants farm aphids"), ("d3", "opera singers sing"))))
    (data / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in (
        ("q1", "which insects make honey"), ("q2", "who sings opera"))))
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\n")
    spec = tmp_path / "down.yaml"  # nothing listens on port 9: refused at once, no retry
    spec.write_text("steps:\n  bm25: {op: retrieve.bm25, params: {k: 3}}\n  api: {op: rerank.api, params: "
                    "{url: 'http://127.0.0.1:9/rerank', model: m, max_retries: 0}, inputs: [bm25]}\n")
    for attempt in range(2):
        status, out, err = bench("--dataset", data, "--flow", f"down={spec}", "--out", tmp_path / "out",
                                 "--no-mlflow")
        assert status == 0, err
        assert "flow 'down': 2 of 2 queries degraded" in out + err and "not reused" in out + err
        assert "cached run" not in out + err, attempt  # run again, the second time too
    summary = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert summary["flows"]["down"]["degraded_queries"] == 2
    assert any("2 of 2 queries degraded" in w for w in summary["warnings"])


def test_a_run_read_from_the_step_cache_names_the_step_that_ran_all_the_same(bench, scifact_slice, tmp_path):
    """A flow's second benchmark said "100% from the step cache" although its TF-IDF reranker, never cached when
    it fits on every query's candidates, had run again: the share counts only cached steps."""
    spec = tmp_path / "fitted.yaml"
    spec.write_text(f"name: fitted\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: "
                    f"'{scifact_slice / 'corpus.jsonl'}', k: 20}}}}\n  tfidf: {{op: rerank.tfidf, params: "
                    "{fit_on: all}}\n", encoding="utf-8")
    common = ["--dataset", scifact_slice, "--flow", spec, "--k", KS, "--no-mlflow", "--cache-dir", tmp_path / "c"]
    assert bench(*common, "--quiet", "--out", tmp_path / "a")[0] == 0
    status, out, err = bench(*common, "--out", tmp_path / "b")
    assert status == 0 and "(100% from the step cache; tfidf not cached)" in out + err, out + err
    assert "(100% from the step cache; tfidf not cached)" in (tmp_path / "b" / "report.md").read_text()


def test_a_flow_that_returns_no_ranking_is_refused_before_any_flow_runs(bench, scifact_slice, flow_specs, tmp_path):
    """It was refused once it had run (and the flows before it with it): its output has no docno to measure."""
    words = tmp_path / "words.yaml"
    words.write_text("name: words\nsteps:\n  w: {op: analyze.word_count, params: {input_column: query}}\n",
                     encoding="utf-8")
    status, _, err = bench("--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}", "--flow", words,
                           "--k", KS, "--no-mlflow", "--quiet", "--out", tmp_path / "out")
    assert status == 2 and "flow 'words' returns no ranking: its steps write word_count; a benchmark needs qid, " \
                           "docno and rank or score" in err, err
    assert not (tmp_path / "out" / "runs").exists()  # the title flow did not run first
