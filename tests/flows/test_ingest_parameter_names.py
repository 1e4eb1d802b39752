"""An ingestion's errors name its parameters in the caller's words: ``flows.api.ingest`` as a Python call passes them
(``source='x'``, ``spec=``, ``colbert=``), ``tessera ingest`` as its options (``--source 'x'``, ``--spec``,
``--colbert``), mapped in one place (``flows.commands.ingest.OPTIONS`` through ``cli_option_error``); a path that
holds such a name (a folder called ``source``) is not rewritten. The command runs in-process (``main``)."""

from __future__ import annotations

import re

import pytest

from flows.api import TesseraError, ingest
from flows.commands import main
from flows.model_check import MissingModelsError


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
