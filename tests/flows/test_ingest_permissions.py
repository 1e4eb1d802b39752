"""A source this user may not read, as a user with someone else's folder meets it: ``tessera ingest`` says which
folder it may not enter or list, in one line, and makes no index. A folder it could not list was ``tessera: internal
error: PermissionError``, a file under a folder it could not enter too, and a glob there was "no file matches it".

The files are real and so are their modes; the tests run ``tessera ingest`` in a child process without the
capabilities that let root read any file (``setpriv``), since root ignores a file's mode."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
NOTES = "Honey bees make honey from the nectar of flowers and keep it in wax combs."


def unprivileged() -> list[str]:
    """The command prefix that runs a program as this user without root's power over file modes."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a file's mode does not stop root")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def ingest(source: str, index: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TESSERA_HOME": str(index.parent / "home")}
    return subprocess.run([*unprivileged(), sys.executable, "-m", "flows", "ingest", "--source", source, "--index",
                           str(index), "--no-dense", "--quiet"], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def closed(tmp_path):
    """``closed/``, a folder of notes whose mode lets no one in (000), beside a readable ``open/``."""
    folder = tmp_path / "closed"
    folder.mkdir()
    (folder / "notes.md").write_text(f"# Bees\n\n{NOTES}\n", encoding="utf-8")
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "bees.md").write_text(f"# Bees\n\n{NOTES}\n", encoding="utf-8")
    folder.chmod(0)
    yield folder
    folder.chmod(0o755)


def test_a_source_this_user_may_not_read_is_one_line_naming_the_folder(tmp_path, closed):
    index = tmp_path / "idx"
    for source, said in [("closed", f"this user may not list the folder {closed} (permission denied)"),
                         ("closed/*.md", f"this user may not list the folder {closed} (permission denied)"),
                         ("closed/notes.md", f"this user may not enter the folder {closed} (permission denied)")]:
        done = ingest(str(tmp_path / source), index)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == (f"tessera: error: field '--source': cannot read --source "
                                       f"'{tmp_path / source}': {said}"), done.stderr
        assert not index.exists()
    again = ingest(str(tmp_path / "open"), index)  # the same user reads a folder it may read
    assert again.returncode == 0, again.stderr


def test_a_recursive_glob_names_the_folders_it_could_not_list(tmp_path, closed):
    """``**/*`` left a folder it could not list out without a word: its files were simply not in the index."""
    (tmp_path / "open" / "deeper").mkdir()
    (tmp_path / "open" / "deeper" / "wasps.txt").write_text("Wasps build paper nests.", encoding="utf-8")
    index = tmp_path / "idx"
    done = ingest(str(tmp_path / "**" / "*"), index)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "could not be listed" in line]
    assert warned == [f"tessera: warning: left out 1 folder(s) that could not be listed, with every file below them: "
                      f"{closed} (Permission denied)"], done.stderr
    from operators.store import Index

    _, table = Index.open(index).columns(["doc_id"])
    assert sorted(table.column("doc_id").to_pylist()) == ["open/bees.md", "open/deeper/wasps.txt"]


def test_files_this_user_may_not_read_are_failures_that_say_so_and_a_retry_takes_them_in(tmp_path, pdf_writer):
    """A PDF it may not open was "cannot read as a PDF: the file is damaged or is not a PDF; the reader found: [Errno
    13] Permission denied", sending its user to repair a sound file; a text file said ``PermissionError: [Errno 13]
    Permission denied: 'PATH'`` after its path."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "bees.md").write_text(f"# Bees\n\n{NOTES}\n", encoding="utf-8")
    pdf_writer(folder / "report.pdf", ["Wasps build paper nests from chewed wood."], title="Wasps")
    (folder / "secret.txt").write_text("Ants farm aphids for honeydew.", encoding="utf-8")
    for name in ("report.pdf", "secret.txt"):
        (folder / name).chmod(0)
    index = tmp_path / "idx"
    done = ingest(str(folder), index)
    assert done.returncode == 0, done.stderr
    for name in ("report.pdf", "secret.txt"):
        assert f"tessera: warning: left out: {folder / name}: cannot read it (Permission denied)\n" in done.stderr
    from operators.store import Index

    assert Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist() == ["bees.md"]
    for name in ("report.pdf", "secret.txt"):
        (folder / name).chmod(0o644)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    retried = subprocess.run([sys.executable, "-m", "flows", "ingest", "--index", str(index), "--retry-failed",
                              "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    assert retried.returncode == 0, retried.stderr
    assert sorted(Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()) == [
        "bees.md", "report-p1", "secret.txt"]


def test_index_add_of_a_file_this_user_may_not_read_names_it_in_one_line(tmp_path, closed):
    """``tessera index add IDX FILE`` of a file it may not read said "step 'index', operator 'sources.jsonl':
    PermissionError: [Errno 13] ...", a step no user of the command named; one in a folder it may not enter was
    ``tessera: internal error: PermissionError``."""
    locked = tmp_path / "open" / "locked.jsonl"
    locked.write_text('{"_id": "a", "text": "Owls hunt at night."}\n', encoding="utf-8")
    locked.chmod(0)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TESSERA_HOME": str(tmp_path / "home")}
    index = tmp_path / "idx"
    for file, why in ((locked, "Permission denied"),
                      (closed / "notes.jsonl", f"this user may not enter the folder {closed} (permission denied)")):
        done = subprocess.run([*unprivileged(), sys.executable, "-m", "flows", "index", "add", str(index), str(file),
                               "--no-dense"], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == (f"tessera: error: field 'FILE': cannot read {file}: {why}; nothing was "
                                       "written"), done.stderr
        assert not index.exists()


def test_an_index_in_a_folder_this_user_may_not_enter_is_one_line_naming_it(tmp_path, closed):
    """``--index`` (or ``tessera index info``'s NAME_OR_PATH) in a folder this user may not enter, or one it may not
    list, was ``tessera: internal error: PermissionError: [Errno 13] ... manifest.json``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TESSERA_HOME": str(tmp_path / "home")}
    enter = f"this user may not enter the folder {closed} (permission denied)"
    for args, said in (
            (["ingest", "--source", str(tmp_path / "open"), "--index", str(closed / "idx"), "--no-dense"],
             f"field '--index': cannot make or add to an index at {closed / 'idx'}: {enter}"),
            (["ingest", "--source", str(tmp_path / "open"), "--index", str(closed), "--no-dense"],
             f"field '--index': cannot make or add to an index at {closed}: this user may not list the folder "
             f"{closed} (permission denied)"),
            (["index", "info", str(closed / "idx")],
             f"field 'NAME_OR_PATH': cannot open the index at {closed / 'idx'}: {enter}")):
        done = subprocess.run([*unprivileged(), sys.executable, "-m", "flows", *args], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"tessera: error: {said}", done.stderr
