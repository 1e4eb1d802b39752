"""How ``tessera`` parses its command line: an unknown option is reported by the command it was given to (with
that command's usage), ``--debug`` is taken before the command too, and ``--version`` names the package's."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from flows.commands import main
from tests.text_checks import TRACEBACK


def _usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("argv, prog", [
    (["run", "bm25", "--index", "sample", "-q", "x", "--frobnicate"], "tessera run"),
    (["index", "info", "some-index", "--frobnicate"], "tessera index info"),
    (["flows", "--frobnicate", "list"], "tessera flows"),
    (["--frobnicate"], "tessera"),
])
def test_an_unknown_option_is_reported_with_the_usage_of_the_command_it_was_given_to(capsys, argv, prog):
    err = _usage_error(capsys, argv)
    assert err.startswith(f"usage: {prog} "), err
    assert err.rstrip().endswith(f"{prog}: error: unrecognized arguments: --frobnicate"), err


@pytest.mark.parametrize("argv, said", [
    # a beginning of a longer option was that option: tessera bench --index mine built its indices in 'mine'
    (["bench", "--dataset", "d", "--flow", "bm25", "--out", "o", "--index-di", "mine"],
     "tessera bench: error: unrecognized arguments: --index-di mine (did you mean '--index-dir'?)"),
    (["run", "bm25", "-q", "x", "--to", "3"],
     "tessera run: error: unrecognized arguments: --to 3 (did you mean '--top'?)"),
    (["run", "bm25", "-q", "x", "--indx", "sample"],
     "tessera run: error: unrecognized arguments: --indx sample (did you mean '--index'?)"),
    # a value without its option: the option that takes it, with the value as it would be given
    (["ingest", "docs.jsonl", "--index", "mine"],
     "tessera ingest: error: unrecognized arguments: docs.jsonl (did you mean --source docs.jsonl?)"),
    (["run", "bm25", "what", "is", "honey"],
     "tessera run: error: unrecognized arguments: what is honey (did you mean --queries 'what is honey'?)"),
    # closeness is of the names, not of the two dashes every option has ('--model' was close to '--help')
    (["run", "bm25", "-q", "x", "--quite"], "tessera run: error: unrecognized arguments: --quite (did you mean "
     "'--quiet'?)"),
    (["run", "bm25", "-q", "x", "--mode", "m"], "tessera run: error: unrecognized arguments: --mode m"),
    # an unknown short option's value is not a query: it said "did you mean --queries 5?"
    (["run", "bm25", "-q", "x", "-x", "5"], "tessera run: error: unrecognized arguments: -x 5"),
    (["run", "bm25", "-q", "x", "-k", "5"], "tessera run: error: unrecognized arguments: -k 5 (--top N shows N rows "
     "a query, and a step's k is one of its params: --set STEP.k=N; tessera flows show FLOW lists its steps)"),
    # an option a user reaches for that the command has not: where that setting is
    (["run", "rag", "-q", "x", "--model", "gemma2"], "tessera run: error: unrecognized arguments: --model gemma2 (a "
     "step's model is one of its params: --set STEP.model=NAME; tessera flows show FLOW lists its steps)"),
    (["ingest", "--index", "mine", "--model", "m"], "tessera ingest: error: unrecognized arguments: --model m (the "
     "encoder and the chunking are set by the ingest spec: --spec ingest_static embeds with the static model, and a "
     "spec file of your own (a copy of flows/specs/ingest.yaml) sets any model, chunk size or overlap)"),
    # another command's spelling of an option: this command's own (tessera index info --index sample was only
    # "unrecognized arguments: --index", tessera run --output and chat -q said nothing more)
    (["index", "info", "--index", "sample"], "tessera index info: error: unrecognized arguments: --index (the index "
     "is this command's first argument, with no option: tessera index info NAME_OR_PATH ...)"),
    (["index", "documents", "sample", "--top", "3"],
     "tessera index documents: error: unrecognized arguments: --top 3 (--limit N lists N documents)"),
    (["run", "bm25", "-q", "x", "--output", "r.trec"], "tessera run: error: unrecognized arguments: --output r.trec "
     "(--json prints one JSON document; --out FILE writes the rows to .parquet, .jsonl or .csv, or a TREC run to "
     ".trec or .run, by its suffix)"),
    (["run", "bm25", "-q", "x", "--limit", "3"],
     "tessera run: error: unrecognized arguments: --limit 3 (--top N shows N rows a query)"),
    (["chat", "-q", "who composed Carmen?"], "tessera chat: error: unrecognized arguments: -q (chat reads its "
     "questions from standard input, one a line: echo QUESTION | tessera chat --json; tessera run rag -q QUESTION "
     "answers one too)"),
])
def test_an_option_is_never_taken_for_a_longer_one_and_the_error_names_what_was_meant(capsys, tmp_path, monkeypatch,
                                                                                       argv, said):
    monkeypatch.chdir(tmp_path)
    err = _usage_error(capsys, argv)
    assert err.rstrip().endswith(said), err
    assert list(tmp_path.iterdir()) == []  # nothing built, nothing written


def test_a_standalone_command_takes_no_beginning_of_an_option_either(capsys, tmp_path, monkeypatch):
    from flows.commands.bench import main as bench_main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        bench_main(["--dataset", "d", "--flow", "bm25", "--out", "o", "--index-di", "mine"])
    assert exit_.value.code == 2 and "(did you mean '--index-dir'?)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_tessera_bench_says_it_searches_no_index_of_yours(capsys, tmp_path, monkeypatch):
    """``--index``, as tessera run takes it, was ``--index-dir``: the dataset's indices were built in that folder."""
    monkeypatch.chdir(tmp_path)
    status = main(["bench", "--dataset", "d", "--flow", "bm25", "--out", "o", "--index", "mine"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("tessera: error: field '--index': tessera bench searches no index of yours ('mine'): it "
                          "builds each flow's index from --dataset's corpus.jsonl"), err
    assert "tessera run FLOW --index NAME --queries QUERIES --out run.trec" in err
    assert list(tmp_path.iterdir()) == []


def test_debug_is_taken_before_the_command_and_after_a_command_group(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    assert main(["--debug", "ops", "retrieve.corpus_bm25"]) == 0
    assert main(["flows", "--debug", "list"]) == 0
    capsys.readouterr()
    assert main(["flows", "show", "no-such-flow"]) == 2  # without --debug: one line
    plain = capsys.readouterr().err
    assert TRACEBACK not in plain and plain.startswith("tessera: error:"), plain
    for argv in (["--debug", "flows", "show", "no-such-flow"], ["flows", "show", "no-such-flow", "--debug"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" in err and err.rstrip().splitlines()[-1] == plain.rstrip(), err


def test_version_prints_the_installed_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"tessera {version('tessera')}"


def test_ops_json_and_format_together_are_refused_not_one_dropped(capsys):
    err = _usage_error(capsys, ["ops", "--json", "--format", "mosaic"])
    assert "argument --format: not allowed with argument --json" in err, err


@pytest.mark.parametrize("command", [("index",), ("cache",), ("flows",), ("models",), ("keys",)])
def test_a_command_groups_help_names_its_actions_in_plain_text(capsys, command):
    """``tessera index --help`` printed its module's docstring: "``tessera index``: ... (add, update, delete)",
    reStructuredText's quotes, and not the documents and compact actions it lists below."""
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out, out
    if command == ("index",):
        said = " ".join(out.split())  # argparse wraps the description at the terminal's width
        assert ("List the indices (list), inspect one (info, documents) or change it in place (add, update, delete, "
                "compact).") in said, out


def test_run_help_says_how_standard_input_is_read_as_the_queries_reader_reads_it(capsys):
    """It said "JSON lines if it starts with '{', else one query a line": a JSON array and tab-separated lines
    (``flows.queries``' other two formats of standard input) were read as one query a line, by its words."""
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert ("'-' for standard input (JSON lines if it starts with '{', a JSON array with '[', qid<TAB>query lines if "
            "every line has a tab, else one query a line)") in said, said


def test_chat_help_says_what_ends_it_and_that_empty_lines_are_skipped(capsys):
    """It said "/exit or an empty line ends"; empty lines are skipped, piped or typed (a paste with a blank line
    ended the chat and left its later lines to the shell): ``_next_question``."""
    with pytest.raises(SystemExit):
        main(["chat", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert ("/new starts over; /exit or the end of input (Ctrl-D) ends; /help lists these; empty lines are "
            "skipped.") in said, said


def test_ingest_help_names_every_suffix_it_reads(capsys):
    """``--source``'s help named ``.parquet``, ``.md`` and ``.html`` but not ``.pq``, ``.markdown``, ``.htm`` nor
    ``.jsonl.gz``, which it reads: a user with such files read that they were not taken."""
    from flows.ingestion.plan import FORMATS

    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    source = said[said.index("--source PATH"):said.index("--index NAME_OR_PATH, -i")]
    missing = [suffix for _, suffixes, _, _ in FORMATS for suffix in suffixes if f" {suffix}" not in
               source.replace("(", " ").replace(")", " ")]
    assert missing == [], source
    assert "'DIR/**/*' reads its subfolders too" in source, source


@pytest.mark.parametrize("argv", [
    ["run", "bm25", "-q", "x", "-i", "sample"],
    ["chat", "-i", "sample"],
    ["cache", "explain", "bm25", "-i", "sample"],
    ["serve", "-i", "sample"],
])
def test_index_is_i_wherever_ingest_takes_it_as_i(argv):
    """``tessera ingest -i sample``, then ``tessera run bm25 -i sample -q x``: ``-i`` was unknown to run, and the
    error said "did you mean --queries sample?", the index taken for a query."""
    from flows.commands import build_parser

    assert build_parser().parse_args(argv).index == "sample"


@pytest.mark.parametrize("command", ["run", "chat", "ingest"])
def test_help_shows_examples_that_parse(capsys, command):
    """``tessera run --help`` (and chat's, ingest's) showed no example of how a query or an index is given; each
    example now shown is a command line this parser takes, up to its shell redirection."""
    import importlib
    import shlex

    from flows.commands import build_parser

    examples = importlib.import_module(f"flows.commands.{command}").EXAMPLES
    with pytest.raises(SystemExit):
        main([command, "--help"])
    said = " ".join(capsys.readouterr().out.split())
    for example in examples:
        assert example in said, said
        words = shlex.split(example)
        words = words[:next((i for i, word in enumerate(words) if word in ("<", ">", "|")), len(words))]
        assert words[:2] == ["tessera", command] and build_parser().parse_args(words[1:]).handler, example
