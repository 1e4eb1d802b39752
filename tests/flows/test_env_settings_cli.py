"""Settings from the environment, through the real ``tessera`` script: a bad one is exit 2 and one line naming it
(or, for ``COLUMNS``, ignored as Python ignores it), never an internal error, a lost table or a folder in ``/``.
Where a setting only shapes what a command prints or where it writes (``COLUMNS``, a relative ``TESSERA_HOME``), the
command runs in this process (``flows.commands.main``, what the script calls, the variable set as the script's
environment has it); the refusals, their exit status and stderr, are the script's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "tessera"
CORPUS = [
    '{"_id": "d1", "title": "Elephants", "text": "Elephants are the largest land animals."}',
    '{"_id": "d2", "title": "Honey bees", "text": "Honey bees make honey from nectar."}',
]


def tessera(*args: str, cwd: Path, stdin=subprocess.DEVNULL, **env: str | None) -> subprocess.CompletedProcess:
    """``tessera ARGS`` in ``cwd`` with ``env`` over this environment (None: unset), no ``TESSERA_DEBUG``."""
    command = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "flows"]
    environ = {**os.environ, "COLUMNS": "160", "PYTHONPATH": str(REPO)}
    environ.pop("TESSERA_DEBUG", None)
    for name, value in env.items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    return subprocess.run([*command, *args], cwd=cwd, env=environ, stdin=stdin, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    """A BM25 index of two documents (no vectors), the input of the commands below: ingested by ``tessera ingest``
    in this process (``flows.commands.main``), as the script would from ``folder``, without a process of its own."""
    from flows.commands import main

    folder = tmp_path_factory.mktemp("env_settings")
    (folder / "corpus.jsonl").write_text("\n".join(CORPUS) + "\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("TESSERA_HOME", str(folder / "home"))
        patch.delenv("TESSERA_DEBUG", raising=False)
        assert main(["ingest", "--source", "corpus.jsonl", "--index", "./idx", "--no-dense", "--quiet"]) == 0
    return folder / "idx"


def tessera_here(monkeypatch, capsys, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``tessera ARGS`` run as ``tessera`` above runs the script, in this process: in ``cwd``, ``env`` over this
    environment, no ``TESSERA_DEBUG``; its exit status and output as ``subprocess.run`` gives them."""
    from flows.commands import main

    with monkeypatch.context() as patch:
        patch.chdir(cwd)
        patch.delenv("TESSERA_DEBUG", raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        capsys.readouterr()
        status = main(list(args))
        out = capsys.readouterr()
    return subprocess.CompletedProcess(["tessera", *args], status, out.out, out.err)


def one_error(done: subprocess.CompletedProcess) -> str:
    """The single ``tessera: error: ...`` line of a refused command (exit 2)."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("tessera: error: "), (
        done.returncode, done.stderr)
    return lines[0]


@pytest.mark.parametrize("columns", ["-5"])  # the other values: tests/operators/test_env_values.py
def test_a_columns_that_is_no_width_is_ignored_and_the_table_is_printed(index, tmp_path, columns, monkeypatch,
                                                                        capsys):
    listed = tessera_here(monkeypatch, capsys, "flows", "list", cwd=tmp_path, TESSERA_HOME=str(tmp_path / "home"),
                          COLUMNS=columns)
    assert listed.returncode == 0 and "bm25" in listed.stdout, listed.stderr
    assert max(len(line) for line in listed.stdout.splitlines()) == 120  # the default width
    found = tessera_here(monkeypatch, capsys, "run", "bm25", "--index", str(index), "-q", "elephants", cwd=tmp_path,
                         TESSERA_HOME=str(tmp_path / "home"), COLUMNS=columns)
    assert found.returncode == 0 and "d1#0" in found.stdout, (found.stdout, found.stderr)


def test_a_narrow_columns_still_prints_the_results(index, tmp_path, monkeypatch, capsys):
    found = tessera_here(monkeypatch, capsys, "run", "bm25", "--index", str(index), "-q", "elephants", cwd=tmp_path,
                         TESSERA_HOME=str(tmp_path / "home"), COLUMNS="1")
    assert found.returncode == 0 and max(len(line) for line in found.stdout.splitlines()) == 20, found.stdout


@pytest.mark.process
def test_queries_from_a_closed_stdin_are_refused_in_one_line(index, tmp_path):
    command = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "flows"]
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    env.pop("TESSERA_DEBUG", None)
    closed = subprocess.run(["sh", "-c", '"$@" <&-', "sh", *command, "run", "bm25", "--index", str(index), "-q", "-"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert one_error(closed) == ("tessera: error: field '--queries': <stdin> is closed: pipe the queries in, or give "
                                 "a queries file or a query's text")


@pytest.mark.process
def test_a_ray_address_ray_cannot_parse_is_refused_naming_ray_address(index, tmp_path):
    done = tessera("run", "bm25", "--executor", "ray", "--index", str(index), "-q", "elephants", cwd=tmp_path,
                   TESSERA_HOME=str(tmp_path / "home"), RAY_ADDRESS="garbage")
    line = one_error(done)
    assert line.startswith("tessera: error: field 'RAY_ADDRESS': RAY_ADDRESS 'garbage' is not an address Ray can "
                           "join: give the head's GCS address, HOST:6379"), line
    assert "unset RAY_ADDRESS" in line


@pytest.mark.parametrize("address", ["ray://head", "head:", "head:99999", "foo://head:6379", "::1:6379"])
def test_every_other_form_ray_cannot_parse_is_refused_the_same_way(address):
    """The check the command above runs, called here: a process each was a second of the fast tests' time."""
    from flows.executors.ray_address import RayAddressError, check_ray_address

    with pytest.raises(RayAddressError) as err:
        check_ray_address(environ={"RAY_ADDRESS": address})
    assert err.value.message.startswith(f"RAY_ADDRESS {address!r} is not an address Ray can join"), err.value.message


@pytest.mark.parametrize("address, fix", [("AUTO", "write 'auto'"), (" local", "write 'local'"),
                                          ("   ", "unset RAY_ADDRESS")])
def test_local_and_auto_are_taken_exactly_as_ray_takes_them(address, fix):
    from flows.executors.ray_address import RayAddressError, check_ray_address

    with pytest.raises(RayAddressError) as err:
        check_ray_address(environ={"RAY_ADDRESS": address})
    assert err.value.message.endswith(f"Ray reads the address exactly as written, spaces and case too; {fix}")


@pytest.mark.process
def test_an_empty_home_without_tessera_home_is_refused_and_nothing_is_written(tmp_path):
    """Every command asks for the home the same way (operators/home.py): ingest, which would write, stands for them."""
    command = ("ingest", "--source", "corpus.jsonl", "--index", "named")
    (tmp_path / "corpus.jsonl").write_text("\n".join(CORPUS) + "\n")
    for blank in (None, "", "  "):
        done = tessera(*command, cwd=tmp_path, HOME="", TESSERA_HOME=blank)
        state = "unset" if blank is None or blank == "" else "blank"
        assert one_error(done) == (f"tessera: error: TESSERA_HOME is {state} and HOME is empty: set TESSERA_HOME "
                                   "to Tessera's folder, or HOME to yours")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]  # no folder named "  " either


def test_a_relative_tessera_home_is_read_from_the_working_directory(tmp_path, monkeypatch, capsys):
    (tmp_path / "corpus.jsonl").write_text("\n".join(CORPUS) + "\n")
    done = tessera_here(monkeypatch, capsys, "ingest", "--source", "corpus.jsonl", "--index", "named", "--no-dense",
                        cwd=tmp_path, TESSERA_HOME="rel")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rel" / "indices" / "named" / "manifest.json").is_file()
    assert f"{tmp_path / 'rel' / 'indices' / 'named'}: 2 docs" in done.stdout + done.stderr  # said absolute


@pytest.mark.parametrize("value, traceback", [("TRUE", True), ("No", False)])
@pytest.mark.process
def test_tessera_debug_prints_tracebacks_for_yes_words_only(tmp_path, value, traceback):
    done = tessera("run", "no-such-flow", "-q", "x", cwd=tmp_path, TESSERA_HOME=str(tmp_path / "home"),
                   TESSERA_DEBUG=value)
    assert done.returncode == 2 and ("Traceback (most recent call last)" in done.stderr) == traceback, done.stderr


@pytest.mark.process
def test_a_tessera_debug_that_is_no_such_word_is_refused(tmp_path):
    done = tessera("ops", cwd=tmp_path, TESSERA_HOME=str(tmp_path / "home"), TESSERA_DEBUG="maybe")
    assert one_error(done) == ("tessera: error: TESSERA_DEBUG must be 1, true, yes or on (print tracebacks), or "
                               "empty, 0, false, no or off (got 'maybe')")
    assert done.stdout == ""


@pytest.mark.parametrize("columns, width", [("abc", 120), ("-5", 120), ("90", 90)])
def test_the_benchmark_progress_lines_take_the_same_width(monkeypatch, capsys, columns, width):
    from flows.bench.console import BenchReporter

    monkeypatch.setenv("COLUMNS", columns)
    with BenchReporter() as reporter:  # stderr is not a terminal here: lines, as wide as COLUMNS says
        reporter.log("a line")
    assert reporter.console.width == width and "a line" in capsys.readouterr().err


def test_a_local_ray_that_does_not_start_in_time_is_one_line_with_what_to_do():
    """``ray.init`` raises a bare ``Exception`` when its node does not come up in time (a loaded machine): it was
    ``tessera: internal error`` and no ``TesseraError`` for ``except TesseraError`` in Python."""
    from flows.executors.ray_address import start_timed_out
    from operators.errors import TesseraError

    ray_said = Exception("The current node timed out during startup. This could happen because some of the raylet "
                         "failed to startup or the GCS has become overloaded.")
    refused = start_timed_out(ray_said)
    assert isinstance(refused, TesseraError)
    assert str(refused).startswith("the local Ray did not start: The current node timed out during startup.")
    assert "RAY_ADDRESS=auto" in str(refused) and "\n" not in str(refused)
    assert start_timed_out(Exception("something else")) is None
