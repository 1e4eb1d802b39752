"""The ``tessera`` command: ``flows.commands.main`` with its real arguments, output streams and exit status.

The entry points themselves run for real in a subprocess: the installed ``tessera`` script (its output, and an
error's one line and exit status 2) and ``python -m flows.run`` (the demo flow, locally). The other tests call
``flows.commands.main`` in-process (``tessera`` fixture), with ``TESSERA_HOME``, ``COLUMNS`` and the working directory
a subprocess would get: the same arguments, stdout, stderr and exit status, without a second or more of imports
and model loading per call (local executor; Ray is tested elsewhere). The two tests that run the demo over the
session's sample index (built in about 20 s) are marked ``slow``.
"""

from __future__ import annotations

import functools
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from operators.registry import all_operators
from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]
QUERIES = REPO / "data" / "sample" / "queries.jsonl"
SCRIPT = Path(sys.executable).parent / "tessera"


def tessera_process(*args: str, home: Path, module: str = "flows", check: int | None = 0,
                    stdin: str | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """Run the installed ``tessera`` script (or ``python -m flows`` when it is not installed)."""
    if module == "flows" and SCRIPT.is_file():
        cmd = [str(SCRIPT), *args]
    else:
        cmd = [sys.executable, "-m", module, *args]
    env = {**os.environ, "TESSERA_HOME": str(home), "COLUMNS": "160"}
    env.pop("TESSERA_DEBUG", None)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, input=stdin)
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def tessera_in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str, home: Path,
                       check: int | None = 0, stdin: str | None = None,
                       cwd: Path = REPO, columns: int = 160) -> subprocess.CompletedProcess:
    """``flows.commands.main(args)`` in-process, as ``tessera_process`` runs the script: in ``cwd`` (the repository),
    ``TESSERA_HOME=home``, ``COLUMNS=columns`` (160), no ``TESSERA_DEBUG``, ``stdin`` (text, not a terminal) as
    standard input;
    returns the exit status and what was written to stdout and stderr as a ``CompletedProcess``."""
    from flows.commands import main

    with monkeypatch.context() as patch:
        patch.chdir(cwd)
        patch.setenv("TESSERA_HOME", str(home))
        patch.setenv("COLUMNS", str(columns))
        patch.delenv("TESSERA_DEBUG", raising=False)
        if stdin is not None:
            patch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        try:
            status = main(list(args))
        except SystemExit as exit_:  # what argparse does for --help and usage errors
            status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        out = capsys.readouterr()
    proc = subprocess.CompletedProcess(["tessera", *args], status, out.out, out.err)
    if check is not None:
        assert status == check, f"exit {status}\nstdout:\n{out.out}\nstderr:\n{out.err}"
    return proc


@pytest.fixture
def tessera(monkeypatch, capsys):
    """``tessera(*args, home=..., check=0, stdin=None)``: ``tessera_in_process`` with this test's patches and
    captured streams."""
    return functools.partial(tessera_in_process, monkeypatch, capsys)


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("tessera: error: ") and TRACEBACK not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.process
def test_the_script_lists_every_registered_operator_and_exits_2_on_an_error(home):
    infos = json.loads(tessera_process("ops", "--json", home=home).stdout)
    assert set(infos) == set(all_operators())
    assert infos["postprocess.reduce"]["parameters"]["k"]["default"] == 10
    assert infos["analyze.word_count"]["scope"] == "row"
    assert_one_line_error(tessera_process("ops", "nope.nothing", home=home, check=None),
                          "unknown operator 'nope.nothing'")


@pytest.mark.parametrize("args", [("ops",), ("ops", "--json"), ("flows", "list"), ("models",)])
@pytest.mark.process
def test_a_reader_that_stops_reading_ends_the_command_quietly_with_status_0(home, args):
    """``tessera ops | head``: the command's writes meet a closed pipe (here closed before the first one)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    cmd = [str(SCRIPT), *args] if SCRIPT.is_file() else [sys.executable, "-m", "flows", *args]
    env = {**os.environ, "TESSERA_HOME": str(home), "COLUMNS": "160"}
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, "")


def test_ops_mosaic_format_and_table(home, tessera):
    body = json.loads(tessera("ops", "--format", "mosaic", home=home).stdout)
    assert set(body) == set(all_operators())
    k = body["postprocess.reduce"]["parameters"]["k"]
    assert set(k) == {"title", "description", "type", "enforce-limit", "required", "supported-values", "default"}
    table = tessera("ops", home=home).stdout
    assert "retrieve.corpus_bm25" in table and "analyze.word_count" in table
    assert "``" not in table and "`max_chunks` per query" in table  # docstrings' reST literals shown as Markdown
    detail = tessera("ops", "postprocess.reduce", home=home).stdout
    assert "Rows to keep per query." in detail and "exclusiveMinimum 0" in detail
    assert_one_line_error(tessera("ops", "nope.nothing", home=home, check=None), "unknown operator 'nope.nothing'")


@pytest.mark.slow
def test_run_demo_writes_k_rows_per_query_and_prints_results(home, tmp_path, sample_index, tessera):
    out = tmp_path / "results.parquet"
    proc = tessera("run", "demo", "--index", str(sample_index), "--queries", str(QUERIES), "--executor", "local",
                   "--out", str(out), "--top", "5", home=home)  # with --out, the tables only when --top asks
    table = pq.read_table(out)
    counts = {q: table.column("qid").to_pylist().count(q) for q in ("q1", "q2", "q3", "q4")}
    assert counts == {"q1": 5, "q2": 5, "q3": 5, "q4": 5}
    for column in ("docno", "doc_id", "title", "text", "text_clean", "score", "rank", "language", "words", "terms",
                   "rank_bm25", "rank_dense", "rank_fused"):
        assert column in table.column_names
    assert len(set(zip(table.column("qid").to_pylist(), table.column("doc_id").to_pylist()))) == 20  # per doc
    assert table.column("text").to_pylist() != table.column("text_clean").to_pylist()  # text is kept
    bees = [r for r in table.to_pylist() if r["qid"] == "q1" and r["rank"] == 1]
    assert bees[0]["title"] == "Bee" and bees[0]["language"] == "en"
    text = proc.stdout
    assert "q1: which insects make honey and pollinate flowers" in text
    assert "Bee" in text and "Gothic architecture" in text
    for header in ("rank", "docno", "title", "score", "language", "words", "terms"):
        assert header in text
    assert "steps" in text and "retrieve.bm25" in text and "retrieve.dense" in text and "fuse.rrf" in text
    assert "cache hits" in text
    assert "demo: 20 rows, 4 queries, 11 steps" in text
    assert f"wrote 20 rows to {out}" in proc.stderr
    # Not a terminal: progress is one line per finished step.
    assert "[11/11] terms (analyze.word_count) done" in proc.stderr


def test_run_without_an_index_names_the_step_and_field(home, tessera):
    proc = tessera("run", "demo", "-q", "bees", "--executor", "local", "--quiet", home=home, check=None)
    assert_one_line_error(proc, "step 'bm25'", "params.index")


def test_run_literal_query_json_and_other_formats(home, tmp_path, tessera):
    spec = tmp_path / "small.yaml"
    spec.write_text("name: small\nsteps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 3}}\n"
                    "  wc: {op: analyze.word_count}\n")
    proc = tessera("run", str(spec), "-q", "honey bees", "--json", "--no-cache", "--quiet",
                   "--out", str(tmp_path / "r.jsonl"), home=home)
    result = json.loads(proc.stdout)
    assert [r["title"] for r in result["rows"]][0] == "Bee" and len(result["rows"]) == 3
    assert result["roles"]["word_count"] == "chip" and set(result["steps"]) == {"bm25", "wc"}
    assert result["executor"] == "local"  # a script reads it, not the description's words
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["docno"] == "wv00790"
    tessera("run", str(spec), "-q", "honey bees", "--no-cache", "--quiet", "--out", str(tmp_path / "r.csv"),
            home=home)
    assert (tmp_path / "r.csv").read_text().splitlines()[0].startswith('"qid","query"')
    assert not (home / "cache").exists()  # --no-cache touches no cache


def test_a_jsonl_query_with_its_conversation_is_searched_as_a_follow_up(home, tmp_path, tessera):
    """A queries file's ``messages`` reach query.contextualize: "How do they make it?" after a question about
    honey finds the honey bee, where the question alone does not."""
    spec = tmp_path / "followup.yaml"
    spec.write_text("name: followup\nsteps:\n  standalone: {op: query.contextualize}\n"
                    "  bm25: {op: retrieve.corpus_bm25, params: {k: 3}}\n")
    conversation = [{"role": "user", "content": "Which insects make honey?"},
                    {"role": "assistant", "content": "Honey bees."}]
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"_id": "2", "text": "How do they make it?", "messages": conversation}) + "\n"
                       + json.dumps({"_id": "alone", "text": "How do they make it?"}) + "\n")
    result = json.loads(tessera("run", str(spec), "-q", str(queries), "--json", "--no-cache", "--quiet",
                                home=home).stdout)
    titles = {qid: [r["title"] for r in result["rows"] if r["qid"] == qid] for qid in ("2", "alone")}
    assert "Bee" in titles["2"] and "Bee" not in titles["alone"], titles
    searched = result["metadata"]["2"]["standalone_query"]
    assert searched == "How do they make it? (Which insects make honey?; Honey bees.)"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"_id": "1", "text": "and then?", "messages": "Honey bees."}) + "\n")
    assert_one_line_error(tessera("run", str(spec), "-q", str(bad), home=home, check=2),
                          "bad.jsonl:1: 'messages' must be a list of {role, content} objects")


@pytest.mark.slow
def test_python_m_flows_run_defaults_to_ray_and_runs_locally_when_asked(home, sample_index):
    assert "default: ray" in tessera_process("--help", home=home, module="flows.run").stdout
    proc = tessera_process("demo", "-q", "gothic cathedrals", "--index", str(sample_index), "--executor", "local",
                           "--top", "2", "--quiet", home=home, module="flows.run")
    assert "Gothic architecture" in proc.stdout and "3 more rows" in proc.stdout, proc.stdout


@pytest.mark.parametrize("spec, needles", [
    ("steps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 0}}\n", ["step 'bm25'", "steps.bm25.params.k"]),
    ("steps:\n  bm25: {op: retrieve.corpus_bm2}\n",
     ["step 'bm25'", "field 'steps.bm25.op'", "did you mean 'retrieve.corpus_bm25'"]),
    ("steps:\n  bm25: {op: retrieve.corpus_bm25, colour: red}\n", ["step 'bm25'", "steps.bm25.colour"]),
    ("steps:\n  a: {op: analyze.word_count, inputs: [zz]}\n", ["step 'a'", "field 'inputs'", "'zz'"]),
    ("steps: [1, 2\n", ["field 'FLOW'", "not valid YAML/JSON: expected ',' or ']', but got '<stream end>' (line 2, "
                       "column 1; while parsing a flow sequence at line 1, column 8)"]),
    ("", ["field 'FLOW'", "bad.yaml: the file is empty: a flow spec is a mapping"]),
])
def test_bad_spec_exits_2_with_one_line_naming_step_and_field(home, tmp_path, spec, needles, tessera):
    path = tmp_path / "bad.yaml"
    path.write_text(spec)
    assert_one_line_error(tessera("run", str(path), "-q", "bees", home=home, check=None), *needles)


def test_bad_arguments_and_missing_files_exit_2(home, tmp_path, tessera, bm25_index):
    assert_one_line_error(tessera("run", "nosuchflow", "-q", "bees", home=home, check=None),
                          "no flow spec file or built-in flow named 'nosuchflow'", "saved flow", "demo")
    assert_one_line_error(tessera("run", "demo", "-q", "missing/queries.jsonl", home=home, check=None),
                          "field '--queries'", "not found")
    beir = tmp_path / "beir"
    beir.mkdir()
    assert_one_line_error(tessera("run", "demo", "-q", f"{beir}/", home=home, check=None),
                          "field '--queries'", f"{beir}/ is a folder, not a queries file")
    (beir / "queries.jsonl").write_text('{"_id": "a", "text": "bees"}\n')
    assert_one_line_error(tessera("run", "demo", "-q", str(beir), home=home, check=None),
                          f"{beir} is a folder, not a queries file; did you mean {beir / 'queries.jsonl'}?")
    assert_one_line_error(tessera("run", "demo", "-q", "bees", "--out", "x.txt", home=home, check=None),
                          "field '--out'")
    for name, text, at in (("q.jsonl", '{"_id": "a", "text": "bees"}\n{"_id": "b", "text": " "}\n', ":2"),
                           ("q.tsv", "a\tbees\nb\t\n", ":2"), ("q.csv", "qid,query\na,bees\nb,\"  \"\n", ": row 2")):
        (tmp_path / name).write_text(text)
        assert_one_line_error(tessera("run", "demo", "-q", str(tmp_path / name), home=home, check=None),
                              "field '--queries'", f"{tmp_path / name}{at}: query 'b' is empty")
    from flows.api import Flow
    from operators.errors import SpecError

    with pytest.raises(SpecError, match="query 2 of 2 is empty"):
        Flow.load("bm25", index=bm25_index).run(["bees", " "])
    for invisible in ("\u200b", "\ufeff\u00ad", "\x01"):  # no word: arbitrary documents, as for a blank one
        assert_one_line_error(tessera("run", "demo", "-q", invisible, home=home, check=None),
                              "field '--queries': the query is empty")
        with pytest.raises(SpecError, match="query 1 of 1 is empty"):
            Flow.load("bm25", index=bm25_index).run([invisible])
    missing_corpus = tmp_path / "c.yaml"
    missing_corpus.write_text("steps:\n  r: {op: retrieve.corpus_bm25, params: {corpus: nope.jsonl}}\n")
    assert_one_line_error(tessera("run", str(missing_corpus), "-q", "bees", "--quiet", home=home, check=None),
                          "step 'r'", "params.corpus", "not found")


def test_flows_save_list_show_run_delete_round_trip(home, tmp_path, tessera):
    spec = tmp_path / "mine.yaml"
    spec.write_text("name: anything\ndescription: three BM25 hits\nsteps:\n"
                    "  bm25: {op: retrieve.corpus_bm25, params: {k: 3}}\n")
    assert "saved flow 'mine'" in tessera("flows", "save", "mine", str(spec), home=home).stdout
    assert (home / "flows" / "mine.yaml").is_file()
    listed = json.loads(tessera("flows", "list", "--json", home=home).stdout)
    kinds = {e["name"]: e["kind"] for e in listed}
    assert kinds["demo"] == "built-in" and kinds["mine"] == "saved" and kinds["train"] == "recipe"
    recipe = next(e for e in listed if e["name"] == "train")  # its mining flow, not an error
    assert "error" not in recipe and recipe["steps"] == ["bm25: retrieve.bm25", "dense: retrieve.dense",
                                                         "fused: fuse.rrf"]
    assert next(e for e in listed if e["name"] == "mine")["description"] == "three BM25 hits"
    # a recipe listed is a recipe shown, and one given to run is refused as a recipe
    assert "training:" in tessera("flows", "show", "train", home=home).stdout
    assert "training" in json.loads(tessera("flows", "show", "train", "--json", home=home).stdout)
    recipe_file = tessera("flows", "show", "train", home=home).stdout.splitlines()[0].removeprefix("# ")
    assert_one_line_error(tessera("run", recipe_file, "-q", "bees", home=home, check=None),
                          "a training recipe, not a flow to run")
    assert "mine" in tessera("flows", "list", home=home).stdout
    shown = tessera("flows", "show", "mine", home=home).stdout
    assert "name: mine" in shown and "retrieve.corpus_bm25" in shown
    assert json.loads(tessera("flows", "show", "mine", "--json", home=home).stdout)["name"] == "mine"
    assert "Bee" in tessera("run", "mine", "-q", "honey bees", "--quiet", home=home).stdout
    assert_one_line_error(tessera("flows", "save", "demo", str(spec), home=home, check=None), "built-in")
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps:\n  x: {op: analyze.word_count, params: {nope: 1}}\n")
    assert_one_line_error(tessera("flows", "save", "bad", str(bad), home=home, check=None), "step 'x'")
    assert not (home / "flows" / "bad.yaml").exists()  # nothing invalid is saved
    # one an earlier release saved, whose params this release refuses, is listed with why (it was listed as runnable)
    (home / "flows" / "older.yaml").write_text(bad.read_text(encoding="utf-8"), encoding="utf-8")
    older = next(e for e in json.loads(tessera("flows", "list", "--json", home=home).stdout) if e["name"] == "older")
    assert "step 'x'" in older["error"] and "nope" in older["error"], older
    assert "deleted" in tessera("flows", "delete", "mine", home=home).stdout
    assert_one_line_error(tessera("flows", "delete", "mine", home=home, check=None), "no saved flow named 'mine'")
    assert_one_line_error(tessera("run", "mine", "-q", "bees", home=home, check=None), "'mine'")


def test_cache_explain_after_a_run_and_clear(home, tmp_path, tessera):
    from flows.cache_code import tessera_version

    flow = tmp_path / "small.yaml"
    flow.write_text("name: small\nsteps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 10}}\n"
                    "  top: {op: postprocess.reduce, params: {k: 5}}\n  wc: {op: analyze.word_count}\n")
    before = tessera("cache", "explain", str(flow), home=home).stdout
    assert "never recorded" in before
    tessera("run", str(flow), "-q", str(QUERIES), "--quiet", home=home)
    second = tessera("run", str(flow), "-q", str(QUERIES), "--quiet", home=home).stdout
    assert "cache hit ratio 100%" in second
    text = tessera("cache", "explain", str(flow), home=home).stdout
    assert "bm25  retrieve.corpus_bm25 v2, scope query" in text and "corpus_sha256" in text
    assert "last run   4 units, 4 hits (100%)" in text
    assert "one row, hashed over: text" in text
    assert f"code       tessera {tessera_version()}, source " in text
    assert " modules: operators.analyze.word_count and " in text and "(--verbose lists them)" in text
    assert " operators.analyze.word_count, operators.base" in tessera("cache", "explain", str(flow), "wc", "-v",
                                                                      home=home).stdout
    explained = json.loads(tessera("cache", "explain", str(flow), "top", "--json", home=home).stdout)
    [top] = explained["steps"]
    assert top["op"] == "postprocess.reduce" and top["identity"] == {"k": 5, "rank_column": "rank"}
    assert top["last_run"] == {"units": 4, "hits": 4} and top["changed"] is False
    assert_one_line_error(tessera("cache", "explain", str(flow), "nope", home=home, check=None), "no step 'nope'")
    assert "cleared" in tessera("cache", "clear", home=home).stdout
    assert not (home / "cache").exists()


def test_ctrl_c_cancels_through_the_token(tmp_path, monkeypatch, capsys):
    """A SIGINT during a run sets the CancelToken; the executor stops at the next batch, exit 130."""
    from flows import commands as cli
    from operators.analyze.word_count import WordCounter

    calls = []
    original = WordCounter.transform

    def interrupting(self, table: pa.Table) -> pa.Table:
        calls.append(table.num_rows)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends
        return original(self, table)

    monkeypatch.setattr(WordCounter, "transform", interrupting)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    queries = tmp_path / "q.txt"
    queries.write_text("one\ntwo\nthree\n")
    spec = tmp_path / "wc.yaml"
    spec.write_text("steps:\n  wc: {op: analyze.word_count, params: {input_column: query}, batch_size: 1}\n")
    before = signal.getsignal(signal.SIGINT)
    code = cli.main(["run", str(spec), "-q", str(queries), "--no-cache", "--quiet"])
    err = capsys.readouterr().err
    assert code == 130 and calls == [1]
    assert "cancelling (Ctrl-C again to abort)" in err and "tessera: cancelled" in err and "step 'wc'" in err
    assert signal.getsignal(signal.SIGINT) == before  # the handler is restored


@pytest.mark.parametrize("suffix", [".jsonl", ".tsv", ".txt", ".parquet", ".csv"])
def test_a_binary_queries_file_is_one_line_without_its_bytes(home, tmp_path, suffix, tessera):
    queries = tmp_path / f"queries{suffix}"
    queries.write_bytes(bytes(range(256)) * 16)
    proc = tessera("run", "demo", "-q", str(queries), home=home, check=None)  # read before the missing index
    assert_one_line_error(proc, "field '--queries'", str(queries))
    assert "\ufffd" not in proc.stderr and len(proc.stderr) < 400


def test_bad_specs_caches_and_outputs_are_one_line_before_anything_runs(home, tmp_path, tessera):
    binary = tmp_path / "spec.yaml"
    binary.write_bytes(bytes(range(256)) * 16)
    assert_one_line_error(tessera("run", str(binary), "-q", "bees", home=home, check=None), "not UTF-8 text")
    deep = tmp_path / "deep.yaml"
    deep.write_text("steps: " + "[" * 20_000 + "]" * 20_000 + "\n")
    assert_one_line_error(tessera("run", str(deep), "-q", "bees", home=home, check=None), "levels deep")
    twice = tmp_path / "twice.yaml"
    twice.write_text("steps:\n  top: {op: retrieve.corpus_bm25}\n  top: {op: postprocess.reduce}\n")
    assert_one_line_error(tessera("run", str(twice), "-q", "bees", home=home, check=None), "'top' is given twice")
    flow = tmp_path / "small.yaml"
    flow.write_text("steps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 3}}\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert_one_line_error(tessera("run", str(flow), "-q", "bees", "--cache-dir", str(a_file), home=home, check=None),
                          "field '--cache-dir'", "is a file, not a folder")
    garbage = tmp_path / "garbage-cache"
    garbage.mkdir()
    (garbage / "index.sqlite").write_bytes(b"\x00garbage" * 64)
    assert_one_line_error(tessera("run", str(flow), "-q", "bees", "--cache-dir", str(garbage), home=home, check=None),
                          str(garbage / "index.sqlite"))
    assert_one_line_error(tessera("run", str(flow), "-q", "bees", "--out", str(a_file / "out.parquet"), home=home,
                                  check=None), "field '--out'", "is a file, not a folder")
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("years of work")
    assert_one_line_error(tessera("cache", "clear", "--cache-dir", str(thesis), home=home, check=None),
                          "not a Tessera step cache")
    assert (thesis / "chapter1.tex").exists()


@pytest.mark.slow
def test_cache_explain_takes_the_index_the_run_had(home, sample_index, tessera):
    tessera("run", "bm25", "--index", str(sample_index), "-q", "gothic cathedrals", "--quiet", home=home)
    explained = json.loads(tessera("cache", "explain", "bm25", "--index", str(sample_index), "--json",
                                   home=home).stdout)
    [bm25] = explained["steps"]
    assert bm25["changed"] is False and bm25["last_run"] == {"units": 1, "hits": 0}
    without = tessera("cache", "explain", "bm25", home=home).stdout  # no index: say why the keys differ
    assert "pass the same --index" in without and "changed since the last run" not in without


def test_run_json_says_a_step_is_cacheable_not_cached(home, tmp_path, tessera):
    """A step showed ``cached: true`` beside ``hits: 0``: ``cached`` meant that the step uses the cache, and read as
    "served from it". It is ``cacheable``; ``hits`` of ``units`` say what the cache served."""
    spec = tmp_path / "small.yaml"
    spec.write_text("name: small\nsteps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 3}}\n")
    runs = [json.loads(tessera("run", str(spec), "-q", "honey bees", "--json", "--quiet", "--cache-dir",
                               str(tmp_path / "cache"), home=home).stdout)["steps"]["bm25"] for _ in range(2)]
    assert [(step["cacheable"], step["hits"], step["units"]) for step in runs] == [(True, 0, 1), (True, 1, 1)]
    assert all("cached" not in step for step in runs)
