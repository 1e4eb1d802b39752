"""An ingestion's errors name its parameters in the caller's words: ``flows.api.ingest`` as a Python call passes them
(``source='x'``, ``spec=``, ``colbert=``), ``tessera ingest`` as its options (``--source 'x'``, ``--spec``,
``--colbert``), mapped in one place (``flows.commands.ingest.OPTIONS`` through ``cli_option_error``); a path that
holds such a name (a folder called ``source``) is not rewritten. The command runs in-process (``main``)."""

from __future__ import annotations

import re

import pytest

from flows.api import TesseraError, ingest
from flows.commands import main
from flows.ingestion.errors import NothingIngestedError
from flows.model_check import MissingModelsError
from tests.flows.conftest import REPO


@pytest.fixture
def sources(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    folder = tmp_path / "source" / "spec=1"  # names of the parameters, in a path: left as they are
    folder.mkdir(parents=True)
    (folder / "notes.docx").write_bytes(b"PK\x03\x04 not a format Tessera reads")
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "honey bees"}\n')
    return folder


def cli_error(capsys, index, *args: str) -> str:
    """The one line ``tessera ingest ARGS --index INDEX`` (BM25 only) refuses with, exit status 2."""
    capsys.readouterr()
    assert main(["ingest", *args, "--index", str(index), "--no-dense", "--executor", "local", "--quiet"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def test_python_errors_name_the_parameters_and_the_cli_its_options(sources, capsys):
    docx, missing, index = sources / "notes.docx", sources / "gone.jsonl", sources / "idx"
    messages = []
    for source in (docx, missing):
        with pytest.raises(TesseraError) as err:
            ingest(str(source), str(index), settings={"dense": False}, progress=False)
        assert err.value.field == "source" and f"cannot read source='{source}'" in err.value.message
        assert not re.search(r"(^|\s)--\w", err.value.message), err.value.message  # no command-line option
        messages.append(err.value.message)
    assert messages[0].endswith("pass it as spec= with no source=")
    with pytest.raises(MissingModelsError) as err:
        ingest(str(sources / "corpus.jsonl"), str(index), settings={"dense": False}, progress=False,
               colbert=str(sources / "no-colbert"))
    assert "step colbert (colbert=)" in str(err.value) and "--colbert" not in str(err.value)

    line = cli_error(capsys, index, "--source", str(docx))
    assert f"field '--source': cannot read --source '{docx}': its type" in line, line
    assert line.endswith("pass it as --spec with no --source"), line
    line = cli_error(capsys, index, "--source", str(missing))
    assert f"field '--source': cannot read --source '{missing}': no such file or folder" in line, line
    line = cli_error(capsys, index, "--source", str(sources / "corpus.jsonl"), "--colbert",
                     str(sources / "no-colbert"))
    assert f"'{sources / 'no-colbert'}' for flow ingest, step colbert (--colbert)" in line, line
    assert not index.exists()


def test_the_retry_advice_names_retry_failed_and_replace_in_the_callers_words(tmp_path, monkeypatch, caplog, capsys):
    """A source with an unreadable line warned ``ingest again with --retry-failed`` to a Python caller too, and a
    retried document whose id is live failed with ``retry with --replace`` in failures.jsonl: the warning now says
    ``retry_failed=True`` to ``flows.api.ingest`` and ``--retry-failed`` to ``tessera ingest`` (the same
    ``OPTIONS``, while the command runs), and the ledger, which both read, names ``replace=True`` and
    ``tessera ingest --replace`` once each; those parameters and options are the ones that retry and replace."""
    import json
    import logging

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "honey bees"}\n{"_id": "d2", "text": "never closed\n')
    python_index, cli_index = tmp_path / "py", tmp_path / "cli"

    def advice() -> str:
        [said] = [r.getMessage() for r in caplog.records if "record(s) of the source are left out" in r.getMessage()]
        caplog.clear()
        return said

    caplog.set_level(logging.WARNING, logger="tessera.ingest")
    ingest(str(corpus), str(python_index), settings={"dense": False}, progress=False)
    said = advice()
    assert said.endswith("(fix them, then ingest again with retry_failed=True)") and "--" not in said, said
    cli = ["--executor", "local", "--no-dense", "--quiet", "--json"]
    assert main(["ingest", "--source", str(corpus), "--index", str(cli_index), *cli]) == 0
    said = advice()
    assert said.endswith("(fix them, then ingest again with --retry-failed)") and "retry_failed" not in said, said
    assert not logging.getLogger("tessera.ingest").filters  # the command's words end with the command

    corpus.write_text('{"_id": "d1", "text": "honey bees"}\n{"_id": "d1", "text": "fixed, but d1 is taken"}\n')
    wanted = "give the document another id, or retry with replace=True (tessera ingest --replace)"
    with pytest.raises(NothingIngestedError, match="no document was ingested: all 1 failed"):  # as the CLI exits 1
        ingest(None, str(python_index), settings={"dense": False}, progress=False, retry_failed=True)
    assert main(["ingest", "--index", str(cli_index), "--retry-failed", *cli]) == 1
    for index in (python_index, cli_index):
        ledger = [json.loads(line) for line in (index / "failures.jsonl").read_text().splitlines()]
        errors = [e["error"] for e in ledger if "error" in e]
        assert errors[-1] == f"duplicate id d1: in the index already; {wanted}", errors
    capsys.readouterr()
    assert ingest(None, str(python_index), settings={"dense": False}, progress=False, retry_failed=True,
                  replace=True).report.resolved == 1
    assert main(["ingest", "--index", str(cli_index), "--retry-failed", "--replace", *cli]) == 0
    assert json.loads(capsys.readouterr().out)["resolved"] == 1


def test_python_source_none_is_refused_in_the_clone_too(tmp_path, monkeypatch):
    """In the clone (where the docs have users work) ``ingest(None, index)`` ingested the bundled sample, the
    built-in spec's own path, without a word; python.md says a ``None`` source raises an ``IngestError``."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(REPO)
    with pytest.raises(TesseraError) as err:
        ingest(None, str(tmp_path / "idx"), settings={"dense": False}, progress=False)
    assert err.value.field == "source" and "source is None" in err.value.message
    assert not (tmp_path / "idx").exists()


def test_no_source_away_from_the_clone_says_no_source_was_given(tmp_path, monkeypatch, capsys):
    """``tessera ingest --index X`` with no ``--source``, run outside the clone, failed with ``file
    'data/sample/corpus.jsonl' does not exist``, a file the user never named: it now says that no ``--source`` was
    given (``source=`` to Python), that the spec reads its own sample path from the working directory, and to give
    one; a source the user gave and that is not there keeps its own error."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    index = tmp_path / "idx"
    said = ("was given, so the spec 'ingest' reads its own sample path data/sample/corpus.jsonl, relative to the "
            f"working directory {tmp_path}, which does not exist here; give")
    with pytest.raises(TesseraError) as err:  # Python's source=None is refused wherever it runs (below)
        ingest(None, str(index), settings={"dense": False}, progress=False)
    assert err.value.field == "source" and err.value.message.startswith("source is None: give the file")
    assert cli_error(capsys, index) == f"tessera: error: field '--source': no --source {said} --source FILE"
    line = cli_error(capsys, index, "--source", "data/sample/corpus.jsonl")
    assert line == ("tessera: error: field '--source': cannot read --source 'data/sample/corpus.jsonl': no such file "
                    f"or folder (working directory {tmp_path})")
    assert not index.exists()
