"""``tessera`` for scripts, part two: ``--json`` outcomes of the commands that change things (index add/update/
delete/compact, cache clear, flows save/delete, bench) as one JSON document on stdout; ``run --out`` printing only
the summary (``--quiet``: nothing), ``--json`` honouring ``--top``; a bad ``$TESSERA_HOME`` named for every
command that opens the step cache; two benchmarks opening one new MLflow store at once. Flows are BM25 over small
corpora (``retrieve.corpus_bm25``, or BM25-only indices: no model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.test_cli_scripting import REPO, one_error, spec, tessera  # noqa: F401 - fixtures

CORPUS = REPO / "data" / "sample" / "corpus.jsonl"


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


def docs(path: Path, *ids: str) -> Path:
    path.write_text("".join(json.dumps({"_id": i, "title": f"title {i}", "text": f"honey bees and {i}"}) + "\n"
                            for i in ids))
    return path


def only_json(out: str):
    return json.loads(out)  # the whole of stdout is one document


def test_index_edits_print_what_changed_as_json(home, tmp_path, tessera):  # noqa: F811
    index = str(tmp_path / "idx")
    status, out, _ = tessera("index", "add", index, str(docs(tmp_path / "a.jsonl", "d1", "d2", "d3")), "--no-dense",
                             "--json", home=home)
    added = only_json(out)
    assert status == 0 and added["created"] is True and added["chunks"] == 3 and added["live"] == 3
    assert added["index"] == index and added["shard"]
    status, out, _ = tessera("index", "add", index, str(docs(tmp_path / "b.jsonl", "d4")), "--json", home=home)
    assert only_json(out)["created"] is False and only_json(out)["live"] == 4
    status, out, _ = tessera("index", "update", index, str(docs(tmp_path / "c.jsonl", "d1", "d9")), "--json",
                             home=home)
    updated = only_json(out)
    assert status == 0 and updated["replaced_chunks"] == 1 and updated["new_documents"] == 1 and updated["live"] == 5
    status, out, _ = tessera("index", "delete", index, "--doc-id", "d2", "--doc-id", "d3", "--json", home=home)
    deleted = only_json(out)
    assert status == 0 and deleted["doc_ids"] == ["d2", "d3"] and deleted["deleted_chunks"] == 2
    assert deleted["live"] == 3
    status, out, _ = tessera("index", "compact", index, "--json", home=home)
    compacted = only_json(out)
    assert status == 0 and compacted["before"]["shards"] == 3 and len(compacted["shards"]) == 1
    assert compacted["chunks"] == 3
    status, out, _ = tessera("index", "delete", index, "--doc-id", "d1", home=home)  # without --json: a line
    assert status == 0 and out.startswith("deleted 1 chunk(s)")


def test_flows_save_delete_and_cache_clear_print_json(home, tmp_path, spec, tessera):  # noqa: F811
    status, out, _ = tessera("flows", "save", "mine", str(spec), "--json", home=home)
    saved = only_json(out)
    assert status == 0 and saved["name"] == "mine" and Path(saved["path"]).is_file() and saved["replaced"] is False
    status, out, _ = tessera("flows", "delete", "mine", "--json", home=home)
    assert status == 0 and only_json(out) == {"name": "mine", "path": saved["path"]}
    assert not Path(saved["path"]).exists()
    status, _, _ = tessera("run", str(spec), "-q", "honey bees", home=home)  # fills the cache
    assert status == 0
    status, out, _ = tessera("cache", "clear", "--json", home=home)
    cleared = only_json(out)
    assert status == 0 and cleared["cleared"] is True and cleared["files"] >= 1 and cleared["bytes"] > 0
    status, out, _ = tessera("cache", "clear", "--json", home=home)
    assert only_json(out)["cleared"] is False and only_json(out)["files"] == 0


def test_run_with_out_prints_the_summary_and_quiet_prints_nothing(home, tmp_path, spec, tessera):  # noqa: F811
    queries = tmp_path / "q.txt"
    queries.write_text("honey bees\nopera singers\n")
    result = tmp_path / "r.jsonl"
    status, out, err = tessera("run", str(spec), "-q", str(queries), "--out", str(result), home=home)
    assert status == 0 and "1: honey bees" not in out and "steps" in out and "tiny" in out
    assert f"wrote 6 rows to {result}" in err
    status, out, _ = tessera("run", str(spec), "-q", str(queries), "--out", str(result), "--top", "1", home=home)
    assert "1: honey bees" in out and "2 more rows" in out  # --top asks for the tables
    status, out, _ = tessera("run", str(spec), "-q", str(queries), "--out", str(result), "--top", "2", home=home)
    assert "1 more row (" in out and "1 more rows" not in out
    status, out, err = tessera("run", str(spec), "-q", str(queries), "--out", str(result), "--quiet", home=home)
    assert status == 0 and out == "" and err == "" and len(result.read_text().splitlines()) == 6


def test_run_json_honours_top_and_leaves_rows_to_out(home, tmp_path, spec, tessera):  # noqa: F811
    queries = tmp_path / "q.txt"
    queries.write_text("honey bees\nopera singers\n")
    status, out, _ = tessera("run", str(spec), "-q", str(queries), "--json", home=home)
    assert status == 0 and len(only_json(out)["rows"]) == 6  # every row by default
    status, out, _ = tessera("run", str(spec), "-q", str(queries), "--json", "--top", "2", home=home)
    rows = only_json(out)["rows"]
    assert [(r["qid"], r["rank"]) for r in rows] == [("1", 1), ("1", 2), ("2", 1), ("2", 2)]
    result = tmp_path / "r.parquet"
    status, out, err = tessera("run", str(spec), "-q", str(queries), "--json", "--top", "1", "--out", str(result),
                               "--quiet", home=home)
    data = only_json(out)  # asked for: printed with --quiet too
    assert status == 0 and len(data["rows"]) == 2 and data["out"] == {"path": str(result), "rows": 6}
    assert err == ""


def test_a_bad_home_is_named_for_every_command_that_opens_the_step_cache(tmp_path, spec, tessera):  # noqa: F811
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    status, _, err = tessera("run", str(spec), "-q", "honey", home=home)
    assert status == 2
    one_error(err, "the default step cache", f"TESSERA_HOME={home}", "--cache-dir DIR or --no-cache")
    from flows.cache_folder import write_marker

    damaged = tmp_path / "home2"
    (damaged / "cache").mkdir(parents=True)
    write_marker(damaged / "cache")  # a step cache whose database is damaged
    (damaged / "cache" / "index.sqlite").write_bytes(b"not a database" * 100)
    for args in (("cache", "prune", "--older-than", "1"), ("cache", "explain", str(spec)),
                 ("run", str(spec), "-q", "honey")):
        status, _, err = tessera(*args, home=damaged)
        assert status == 2, args
        one_error(err, "the default step cache", f"TESSERA_HOME={damaged}", "is not a step cache database")
    status, _, err = tessera("cache", "prune", "--older-than", "1", "--cache-dir", str(damaged / "cache"),
                             home=tmp_path / "h3")  # the user's own --cache-dir: no word of TESSERA_HOME
    assert status == 2 and "TESSERA_HOME" not in one_error(err, "is not a step cache database")


def beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines()[:30]]
    with (folder / "corpus.jsonl").open("w") as f:
        for row in rows:
            f.write(json.dumps({"_id": row["_id"], "title": row.get("title", ""), "text": row["text"]}) + "\n")
    picked = rows[:4]
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": r["text"][:60]}) + "\n"
                                                  for i, r in enumerate(picked)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\t{r['_id']}\t1\n" for i, r in enumerate(picked)))
    return folder


def bench_spec(tmp_path: Path, dataset: Path) -> Path:
    path = tmp_path / "b.yaml"
    path.write_text(f"name: b\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: "
                    f"{dataset / 'corpus.jsonl'}, k: 10}}}}\n")
    return path


@pytest.mark.slow  # a benchmark: about ten seconds of imports and MLflow
def test_bench_json_gives_the_summary_and_the_files(home, tmp_path, tessera):  # noqa: F811
    pytest.importorskip("mlflow")
    dataset = beir(tmp_path / "ds")
    status, out, _ = tessera("bench", "--dataset", str(dataset), "--flow", f"b={bench_spec(tmp_path, dataset)}",
                             "--out", str(tmp_path / "out"), "--k", "1,5", "--json", "--quiet", home=home)
    data = only_json(out)
    assert status == 0 and data["queries"] == 4 and data["k"] == 5
    measures = data["flows"]["b"]["measures"]
    assert 0 < measures["nDCG@5"] <= 1 and "R@1" in measures
    assert Path(data["files"]["report.md"]).is_file() and Path(data["files"]["metrics.json"]).is_file()


@pytest.mark.slow  # two benchmark processes (each a few seconds of imports)
def test_two_benchmarks_into_one_new_mlflow_store_both_succeed(tmp_path):
    pytest.importorskip("mlflow")
    dataset = beir(tmp_path / "ds")
    spec_path = bench_spec(tmp_path, dataset)
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home")}
    env.pop("TESSERA_DEBUG", None)
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    procs = [subprocess.Popen([sys.executable, "-m", "flows", "bench", "--dataset", str(dataset), "--flow",
                               f"b={spec_path}", "--out", str(tmp_path / f"out{i}"), "--k", "1,5", "--quiet",
                               "--mlflow-uri", store, "--no-cache"],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert (tmp_path / "store" / "mlflow.db.lock").exists()


@pytest.mark.integration  # a whole chat over the bundled corpus (in-process: test_chat_command runs one in a process)
def test_chat_json_prints_one_json_line_per_answer(fault_models, tmp_path, monkeypatch, capsys):
    from tests.flows.test_chat_command import SPEC
    from tests.flows.test_cli import tessera_in_process

    spec_path = tmp_path / "small_rag.yaml"
    spec_path.write_text(SPEC)
    fault_models.reply = "Honey bees make honey [1]."
    proc = tessera_in_process(monkeypatch, capsys, "chat", str(spec_path), "--model", "fault-ok", "--no-cache",
                              "--json", home=tmp_path / "home",
                              stdin="Which insects make honey?\n/new\nHow do they make it?\n")
    lines = [json.loads(line) for line in proc.stdout.splitlines()]  # nothing else on stdout
    assert [(line["turn"], line["question"]) for line in lines] == [(1, "Which insects make honey?"),
                                                                     (2, "How do they make it?")]
    assert all(line["answer"] == "Honey bees make honey [1]." and line["references"] for line in lines)
    assert "ask a question" in proc.stderr and "a new conversation" in proc.stderr


def test_a_nan_or_infinite_score_is_null_in_the_json_rows(capsys):
    """JSON has no NaN: the encoder wrote ``NaN`` and ``Infinity``, which JSON.parse and jq refuse."""
    import pyarrow as pa

    from flows.commands._support import TableRows, print_json

    table = pa.table({"docno": ["a", "b", "c", "d"], "score": [1.5, float("nan"), None, float("-inf")],
                      "rank": [1, 2, 3, 4]})
    print_json({"rows": TableRows(table)})

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    rows = json.loads(capsys.readouterr().out, parse_constant=refuse)["rows"]
    assert [row["score"] for row in rows] == [1.5, None, None, None]
    assert [row["rank"] for row in rows] == [1, 2, 3, 4]


def test_run_json_says_which_queries_found_nothing_as_the_summary_line_does(home, tmp_path, spec, tessera):  # noqa: F811
    """The summary line says "2 queries (1 with no results)"; --json's description said "3 rows, 1 step", without the
    query that found nothing, and nothing named it: a script had to diff its qids against the rows'."""
    status, out, _ = tessera("run", str(spec), "-q", "xyzzyqq", "-q", "honey bees", "--json", home=home)
    result = only_json(out)
    assert status == 0 and result["no_results"] == ["1"], result["no_results"]
    assert result["description"].startswith("3 rows, 2 queries (1 with no results), 1 step in "), result
    status, out, _ = tessera("run", str(spec), "-q", "honey bees", "--json", home=home)
    assert only_json(out)["no_results"] == [] and "no results" not in only_json(out)["description"]


@pytest.mark.parametrize("out, hint", [
    ("res.json", "; for one JSON document, --json prints it on stdout (--json > FILE.json), and .jsonl writes a row "
     "a line"),
    ("-", "; stdout gets the tables, or with --json one JSON document (--json > FILE.json)"),
])
def test_out_as_json_or_stdout_says_what_gives_that(home, tmp_path, spec, tessera, out, hint):  # noqa: F811
    """``--out res.json`` and ``--out -`` were only told the suffixes --out writes, not that --json is the JSON
    document (on stdout) they were after."""
    status, stdout, err = tessera("run", str(spec), "-q", "honey bees", "--out", out, home=home)
    line = one_error(err, "field '--out': cannot write ")
    assert status == 2 and stdout == "" and line.endswith("must end in .parquet, .jsonl, .csv, .trec, .run" + hint)
