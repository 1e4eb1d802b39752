"""A command's errors name the option the user typed (``--cache-dir``), not the engine's field (``cache_dir``)."""

from __future__ import annotations

import pytest

from flows.commands import main
from flows.commands._support import named_as_typed
from operators.errors import SpecError


@pytest.fixture
def run_error(bm25_index, tmp_path, capsys, monkeypatch):
    """``run_error(*options)``: the one error line of ``tessera run bm25`` over ``bm25_index`` with ``options``."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))

    def run(*options: str, command=main, name: str = "run") -> str:
        capsys.readouterr()
        queries = [] if "--queries" in options else ["--queries", "honey bees"]
        args = ["bm25", "--index", str(bm25_index), *queries, "--quiet", "--executor", "local", *options]
        assert command([name, *args] if name else args) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    return run


def test_run_names_the_options_as_typed(run_error, tmp_path):
    """``--cache-dir FILE`` said ``field 'cache_dir'`` (the step cache's own name); ``--out``, ``--queries`` said
    ``field 'out'``, ``field 'queries'``."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    err = run_error("--cache-dir", str(a_file))
    assert err.startswith("tessera: error: field '--cache-dir': cache directory ") and "cache_dir" not in err
    assert run_error("--cache-dir", str(a_file / "sub")).startswith("tessera: error: field '--cache-dir': ")
    assert run_error("--cache-dir", "xx://bucket").startswith("tessera: error: field '--cache-dir': --cache-dir ")
    assert run_error("--no-cache", "--cache-dir", str(tmp_path)).startswith("tessera: error: field '--cache-dir': ")
    assert run_error("--out", str(tmp_path / "x.xyz")).startswith("tessera: error: field '--out': cannot write ")
    err = run_error("--queries", str(tmp_path / "missing.jsonl"))
    assert err == f"tessera: error: field '--queries': queries file not found: {tmp_path / 'missing.jsonl'}"


def test_the_job_entry_point_names_them_too(run_error, tmp_path):
    from flows.commands.run import main as run_main

    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert run_error("--cache-dir", str(a_file), command=run_main, name="").startswith(
        "tessera: error: field '--cache-dir': cache directory ")


def test_a_steps_own_field_is_not_taken_for_an_option():
    """An engine error about a step names that step's field (a param of the flow), whatever options share its name;
    one of the command's own (``CliError``) or without a step is the option's."""
    options = {"queries": "--queries", "cache_dir": "--cache-dir", "cache-dir": "--cache-dir"}
    assert named_as_typed(SpecError("no queries", step="bm25", field="queries"), options).field == "queries"
    assert named_as_typed(SpecError("no cache", field="cache_dir"), options).field == "--cache-dir"
    assert named_as_typed(SpecError("other", field="k"), options).field == "k"


def test_a_specs_own_field_of_an_options_name_is_not_taken_for_the_option(tmp_path, capsys, monkeypatch):
    """A top-level ``index:`` in the spec file (or ``top`` in a mosaicRAG request) was reported as the option the
    user typed right (``field '--index'``), pointing at the command line instead of the file."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    spec, request = tmp_path / "mine.yaml", tmp_path / "request.json"
    spec.write_text("index: notes\nsteps:\n  bm25: {op: retrieve.bm25}\n")
    request.write_text('{"query": "honey", "top": 3, "1": {"id": "bm25", "op": "retrieve.bm25"}}')
    for source, field in ((spec, "index"), (request, "top")):
        capsys.readouterr()
        assert main(["run", str(source), "--index", str(tmp_path / "none"), "-q", "x", "--top", "3"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"tessera: error: field '{field}': {source}") and "unknown field" in err, err



def test_a_positional_argument_is_named_as_help_shows_it(tmp_path, capsys, monkeypatch):
    """``tessera run hybrd`` said ``field 'spec'`` (``Flow.load``'s argument) and ``tessera ops x`` ``field 'op'``,
    names ``--help`` never shows: ``FLOW``, ``NAME``; and ``flows save NAME FILE`` the argument the spec is read from,
    not its first."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    for args, named in ((["run", "hybrd", "--queries", "x"], "FLOW"), (["cache", "explain", "hybrd"], "FLOW"),
                        (["ops", "rerank.nosuch"], "NAME"), (["flows", "show", "hybrd"], "NAME"),
                        (["models", "nosuch"], "NAME"), (["flows", "save", "mine", str(empty)], "FILE")):
        capsys.readouterr()
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()[-1]
        typed = args[-1] if args[1] == "save" else args[1 + (args[0] == "cache")]
        assert err.startswith(f"tessera: error: field '{named}': ") and typed in err, (args, err)


def test_a_spec_files_own_field_keeps_its_name_beside_a_positional():
    """``flows save NAME FILE``: a bad ``name:`` inside the file is the file's field, not the argument NAME; the
    file's own error is FILE's (it said ``field 'NAME'``: the engine's ``spec`` went to the first argument)."""
    from flows.commands import build_parser

    options = build_parser().parse_args(["flows", "save", "mine", "spec.yaml"]).typed_options
    err = SpecError("must be a word", field="name")
    err.in_spec = True
    assert named_as_typed(err, options).field == "name"
    err = SpecError("not valid YAML", field="spec")
    err.in_spec = True
    assert named_as_typed(err, options).field == "FILE"
    assert named_as_typed(SpecError("not a valid flow name", field="name"), options).field == "NAME"
    assert named_as_typed(SpecError("bad", step="b", field="op"), options).field == "op"
