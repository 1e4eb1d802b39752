"""``tessera`` in scripts: ``--out`` written whole under a temporary name of each process's own (two runs on one
file, an interrupted write), queries from standard input, pipes and FIFOs, files with a byte order mark or a JSON
array, one-line errors (exit 2) for outputs and homes that cannot be written, and ``flows show`` of a JSON spec
whose stdout stays JSON. Flows here are BM25 over the sample corpus read as JSONL (``retrieve.corpus_bm25``, no
index); the signal and concurrency tests run the installed command in subprocesses."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "sample" / "corpus.jsonl"
SCRIPT = Path(sys.executable).parent / "tessera"


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def spec(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(f"name: tiny\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {CORPUS}, k: 3}}}}\n")
    return path


@pytest.fixture
def tessera(monkeypatch, capsys):
    """``tessera(*args, home=..., stdin=None)``: ``flows.commands.main(args)`` in-process; returns
    ``(status, stdout, stderr)``. ``stdin`` (bytes) becomes standard input."""
    from flows.commands import main

    def run(*args: str, home: Path, stdin: bytes | None = None) -> tuple[int, str, str]:
        with monkeypatch.context() as patch:
            patch.chdir(REPO)
            patch.setenv("TESSERA_HOME", str(home))
            patch.delenv("TESSERA_DEBUG", raising=False)
            if stdin is not None:
                patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
            capsys.readouterr()
            status = main(list(args))
            out = capsys.readouterr()
        return status, out.out, out.err

    return run


def one_error(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tessera: error: ") and TRACEBACK not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def qids(path: Path) -> list[str]:
    return sorted({json.loads(line)["qid"] for line in path.read_text().splitlines()})


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# -- queries from standard input, pipes and FIFOs -------------------------------------------------------------


@pytest.mark.parametrize("stdin, expected", [
    (b'{"_id": "a", "text": "honey bees"}\n\n{"qid": "b", "query": "opera singers"}\n', ["a", "b"]),  # JSON lines
    (b"honey bees\nopera singers\n", ["1", "2"]),  # one query a line
    (b'[{"_id": "x", "text": "honey bees"}]', ["x"]),  # a JSON array
    (b'\xef\xbb\xbf{"_id": "a", "text": "honey bees"}\n', ["a"]),  # with a byte order mark
    # a TSV piped in (every line holds a tab), its header optional: searched line by line, qids in the text
    (b"qid\tquery\nq7\thoney bees\nq8\topera singers\n", ["q7", "q8"]),
    (b"q7\thoney bees\r\nq8\topera singers\r\n", ["q7", "q8"]),
    (b"honey bees\nopera\tsingers\n", ["1", "2"]),  # a tab in one line only: one query a line
])
def test_dash_reads_the_queries_from_standard_input(home, tmp_path, spec, tessera, stdin, expected):
    out = tmp_path / "r.jsonl"
    status, _, err = tessera("run", str(spec), "-q", "-", "--no-cache", "--quiet", "--out", str(out), home=home,
                             stdin=stdin)
    assert status == 0, err
    assert qids(out) == expected
    assert "-" not in {json.loads(line)["query"] for line in out.read_text().splitlines()}


def test_a_fifo_is_read_as_a_queries_file(home, tmp_path, spec, tessera):
    """``-q <(...)`` and ``-q /dev/stdin`` are pipes: not regular files, read all the same (no suffix: sniffed)."""
    for name, body in (("queries", "honey bees\n"), ("queries.tsv", "q7\thoney bees\n")):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        writer = threading.Thread(target=fifo.write_text, args=(body,))
        writer.start()
        status, stdout, err = tessera("run", str(spec), "-q", str(fifo), "--no-cache", "--quiet", "--json",
                                      home=home)
        writer.join()
        assert status == 0, err
        assert {row["qid"] for row in json.loads(stdout)["rows"]} == {"1" if name == "queries" else "q7"}


def test_boms_json_arrays_and_jsonl_arrays(home, tmp_path, spec, tessera):
    bom = b"\xef\xbb\xbf"
    files = {"q.jsonl": bom + b'{"_id": "a", "text": "honey bees"}\n',
             "q.txt": bom + b"honey bees\nopera\n",
             "q.json": b'[{"_id": "a", "text": "honey bees"}, {"qid": "b", "query": "opera"}]'}
    expected = {"q.jsonl": {"a": "honey bees"}, "q.txt": {"1": "honey bees", "2": "opera"},
                "q.json": {"a": "honey bees", "b": "opera"}}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        status, stdout, err = tessera("run", str(spec), "-q", str(tmp_path / name), "--no-cache", "--quiet",
                                      "--json", home=home)
        assert status == 0, (name, err)
        assert {r["qid"]: r["query"] for r in json.loads(stdout)["rows"]} == expected[name]
    (tmp_path / "arr.jsonl").write_text('[{"_id": "a", "text": "honey"}]\n')
    status, _, err = tessera("run", str(spec), "-q", str(tmp_path / "arr.jsonl"), "--no-cache", home=home)
    assert status == 2
    one_error(err, "arr.jsonl:1", "not an array", "a JSON array of queries is read from a .json file")
    (tmp_path / "bad.json").write_text('[{"_id": "a"}]')
    status, _, err = tessera("run", str(spec), "-q", str(tmp_path / "bad.json"), "--no-cache", home=home)
    assert status == 2
    one_error(err, "query 1 of the array", "needs a text (query or text); its fields: '_id'")


def test_a_json_lines_query_may_hold_unicode_line_separators(tmp_path, monkeypatch):
    """JSON strings may hold U+2028 and U+0085 as they are (``json.dumps(..., ensure_ascii=False)`` writes them so);
    a JSON lines file ends its lines at "\\n" only, from a file or from standard input."""
    from flows.queries import read_queries

    data = '{"_id": "a", "text": "honey\u2028bees"}\r\n{"_id": "b", "text": "opera\u0085house"}\n'
    expected = [{"qid": "a", "query": "honey\u2028bees"}, {"qid": "b", "query": "opera\u0085house"}]
    (tmp_path / "q.jsonl").write_text(data, encoding="utf-8")
    assert read_queries(tmp_path / "q.jsonl").to_pylist() == expected
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode()), encoding="utf-8"))
    assert read_queries("-").to_pylist() == expected


# -- outputs -----------------------------------------------------------------------------------------------------


def test_an_output_that_cannot_be_written_is_one_line_exit_2(home, tmp_path, spec, tessera):
    blocked = tmp_path / "afile"
    blocked.write_text("x")
    status, _, err = tessera("run", str(spec), "-q", "honey", "--no-cache", "--out", str(blocked / "r.jsonl"),
                             home=home)
    assert status == 2
    one_error(err, "is a file, not a folder")
    # a folder whose name is too long: what the filesystem says, before the run
    long_out = tmp_path / ("d" * 300) / "r.jsonl"
    status, _, err = tessera("run", str(spec), "-q", "honey", "--no-cache", "--out", str(long_out), home=home)
    assert status == 2
    one_error(err, "field '--out'", "cannot write --out", "too long")
    assert leftovers(tmp_path) == []
    if Path("/proc/self").is_dir():  # root passes os.access there; making a file does not
        status, _, err = tessera("run", str(spec), "-q", "honey", "--no-cache", "--out", "/proc/tessera-x.jsonl",
                                 home=home)
        assert status == 2
        one_error(err, "cannot write --out /proc/tessera-x.jsonl")


def wide_spec(tmp_path: Path, k: int) -> Path:
    path = tmp_path / "wide.yaml"
    path.write_text(f"name: wide\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {CORPUS}, k: {k}}}}}\n")
    return path


def _script(*args: str, home: Path) -> list[str]:
    cmd = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "flows"]
    return [*cmd, *args]


def _env(home: Path) -> dict:
    env = {**os.environ, "TESSERA_HOME": str(home)}
    env.pop("TESSERA_DEBUG", None)
    return env


def test_writers_of_one_file_at_once_each_use_their_own_temporary_file(tmp_path):
    """``write_results`` from several threads at once: every call returns, the file is one table's rows, whole."""
    import pyarrow as pa

    from flows.queries import write_results

    tables = [pa.table({"qid": [str(n)] * 20000, "docno": [f"d{i}" for i in range(20000)],
                        "rank": list(range(1, 20001)), "text": ["honey bees " * 10] * 20000}) for n in range(4)]
    out = tmp_path / "same.jsonl"
    errors: list[BaseException] = []

    def write(table) -> None:
        try:
            write_results(table, out)
        except BaseException as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=write, args=(t,)) for t in tables]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 20000 and len({r["qid"] for r in rows}) == 1
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_two_runs_writing_one_file_at_once_leave_one_whole_file(home, tmp_path, tessera):
    """Each writer has its own temporary file: both exit 0 and the file is one of the two results, whole."""
    spec = wide_spec(tmp_path, k=300)
    alone = {}
    for name, words in (("a", ["honey", "music", "river", "war"]), ("b", ["opera", "planet", "king"])):
        (tmp_path / f"{name}.txt").write_text("\n".join(f"{w} {i}" for i in range(15) for w in words) + "\n")
        status, _, err = tessera("run", str(spec), "-q", str(tmp_path / f"{name}.txt"), "--no-cache", "--quiet",
                                 "--out", str(tmp_path / f"{name}.jsonl"), home=home)
        assert status == 0, err
        alone[name] = (tmp_path / f"{name}.jsonl").read_text()
    assert alone["a"] != alone["b"]
    out = tmp_path / "out" / "same.jsonl"
    procs = [subprocess.Popen(_script("run", str(spec), "-q", str(tmp_path / f"{n}.txt"), "--no-cache", "--quiet",
                                      "--out", str(out), home=home),
                              cwd=REPO, env=_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for n in alone]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [rc for rc, _ in results] == [0, 0], results
    assert out.read_text() in alone.values()
    assert leftovers(out.parent) == []


@pytest.mark.slow  # a subprocess whose output takes about a second to write, to be signalled while it does
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_the_output_is_written_leaves_no_temporary_file(home, tmp_path, signum, status):
    spec = wide_spec(tmp_path, k=1000)
    (tmp_path / "q.txt").write_text("".join(f"honey bees music river {i}\n" for i in range(40)))
    folder = tmp_path / "out"
    folder.mkdir()
    proc = subprocess.Popen(_script("run", str(spec), "-q", str(tmp_path / "q.txt"), "--no-cache", "--quiet",
                                    "--out", str(folder / "r.jsonl"), home=home),
                            cwd=REPO, env=_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and not any(p.name.endswith(".tmp") for p in folder.iterdir()):
        time.sleep(0.002)
    proc.send_signal(signum)
    rc = proc.wait(timeout=120)
    err = proc.stderr.read()
    if rc == 0:
        pytest.skip("the write finished before the signal arrived")
    assert rc == status, err
    assert TRACEBACK not in err
    assert os.listdir(folder) == []  # neither a temporary file nor a partial output


# -- homes, bench outputs, flows show ------------------------------------------------------------------------------


def test_a_home_that_cannot_hold_flows_or_the_cache_is_one_line(tmp_path, spec, tessera):
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    status, _, err = tessera("flows", "save", "myf", str(REPO / "flows" / "specs" / "bm25.yaml"), home=home)
    assert status == 2
    one_error(err, "cannot save flow 'myf'", f"TESSERA_HOME={home}")
    status, _, err = tessera("run", str(spec), "-q", "honey", home=home)
    assert status == 2
    one_error(err, "the default step cache", f"TESSERA_HOME={home}", "--cache-dir DIR or --no-cache")
    status, _, err = tessera("run", str(spec), "-q", "honey", "--cache-dir", str(home / "c"), home=home)
    assert status == 2
    assert "TESSERA_HOME" not in one_error(err, "is a file, not a folder")  # the user's own --cache-dir


def test_bench_refuses_a_file_as_out_before_anything_runs(home, tmp_path, tessera):
    pytest.importorskip("ir_measures")
    dataset = tmp_path / "ds"
    (dataset / "qrels").mkdir(parents=True)
    (dataset / "corpus.jsonl").write_text('{"_id": "d1", "title": "Bee", "text": "honey bees"}\n')
    (dataset / "queries.jsonl").write_text('{"_id": "q1", "text": "honey"}\n')
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    out = tmp_path / "afile"
    out.write_text("x")
    for target, needle in ((out, "is a file"), (out / "sub", f"cannot be made: {out} is a file")):
        status, _, err = tessera("bench", "--dataset", str(dataset), "--flow", "bm25", "--out", str(target),
                                 "--index-dir", str(tmp_path / "indices"), "--no-mlflow", "--quiet", home=home)
        assert status == 2
        one_error(err, "field '--out'", needle)
    assert not (tmp_path / "indices").exists() and out.read_text() == "x"


def test_flows_show_of_a_json_spec_prints_only_json_on_stdout(home, tmp_path, tessera):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "steps": {"bm25": {"op": "retrieve.corpus_bm25"}}}))
    status, stdout, err = tessera("flows", "show", str(path), home=home)
    assert status == 0 and json.loads(stdout)["name"] == "mine"
    assert err.strip() == f"# {path}"
    status, stdout, _ = tessera("flows", "show", "bm25", home=home)  # YAML: the path is a YAML comment
    assert status == 0 and stdout.startswith("# ") and "retrieve.bm25" in stdout
    for name in ("broken.yaml", "broken.json"):  # not UTF-8: one line naming it, as tessera run says it
        (tmp_path / name).write_bytes(b"\xff\x8a\x00 random bytes")
        status, stdout, err = tessera("flows", "show", str(tmp_path / name), home=home)
        assert (status, stdout) == (2, "") and err.strip() == (
            f"tessera: error: field 'NAME': {tmp_path / name}: not a spec (the file is not UTF-8 text: byte 0xff "
            "at byte 1, line 1); save it as UTF-8 text"), err


def test_flows_show_json_prints_a_spec_only_once_it_validates(home, tmp_path, tessera):
    """--json promised the validated spec, and printed a cycle or a misspelt param with exit 0."""
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text("steps:\n  a: {op: analyze.word_count, inputs: [b]}\n  b: {op: analyze.word_count, inputs: [a]}\n")
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text("steps:\n  bm25: {op: retrieve.corpus_bm25, params: {top_k: 5}}\n")
    for path, says in ((cycle, "the flow has a cycle: a -> b -> a"), (misspelt, "did you mean 'k'?")):
        status, stdout, err = tessera("flows", "show", str(path), "--json", home=home)
        assert (status, stdout) == (2, "") and says in one_error(err, "tessera: error:"), err
        status, stdout, _ = tessera("flows", "show", str(path), home=home)  # as written: shown, as the help says
        assert status == 0 and "steps:" in stdout
    status, stdout, _ = tessera("flows", "show", "hybrid", "--json", home=home)
    assert status == 0 and set(json.loads(stdout)["steps"]) == {"bm25", "dense", "fused"}


# -- index add from standard input ---------------------------------------------------------------------------------


def test_index_add_reads_standard_input_and_pipes(home, tmp_path, tessera):
    index = tmp_path / "idx"
    status, stdout, err = tessera("index", "add", str(index), "-", "--no-dense", home=home,
                                  stdin=b'{"_id": "n1", "title": "Zebra", "text": "zebra stripes"}\n')
    assert status == 0 and "1 live" in stdout, err
    fifo = tmp_path / "more"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=('{"_id": "n2", "title": "G", "text": "giraffe"}\n',))
    writer.start()
    status, stdout, err = tessera("index", "add", str(index), str(fifo), "--no-dense", home=home)
    writer.join()
    assert status == 0 and "2 live" in stdout, err
    status, _, err = tessera("index", "add", str(index), "-", "--no-dense", home=home, stdin=b"not json\n")
    assert status == 2
    one_error(err, "<stdin>", "nothing was written")


def test_a_home_that_is_a_file_is_said_so_by_index_info_and_flows_list(tmp_path, tessera):
    """`index info` said 'manifest.json not found (the directory does not exist); build one with tessera ingest',
    and `flows list` named the flows folder as if it were one, when $TESSERA_HOME (or its flows/) was a file."""
    home = tmp_path / "homefile"
    home.write_text("not a folder")
    status, _, err = tessera("index", "info", "named1", home=home)
    assert status == 2 and f"{home}/indices/named1 is under the file {home}, not in a folder" in err, err
    status, out, err = tessera("flows", "list", home=home)
    assert status == 0 and f"but {home} is a file: none can be saved until it is moved away" in err, err
    assert "saved flows live in" not in out
