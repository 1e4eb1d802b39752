"""What a terminal shows. On a dumb terminal (``TERM=dumb``: Emacs's shell, an editor's console), a pty that cannot
move its cursor, ``tessera run`` and ``tessera ingest`` print their progress as lines, as in a log
(``flows.progress.redraws``): ``tessera run`` printed nothing at all there (rich draws no bar on such a terminal),
only a stray blank line, and ``tessera ingest`` filled it with a tqdm bar's carriage returns. ``tessera run -q -`` at
a terminal says it reads the queries there."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from tests.flows.test_cli import REPO, SCRIPT

pytestmark = pytest.mark.process  # each test starts `tessera` on a pty

CORPUS = REPO / "data" / "sample" / "corpus.jsonl"


def on_a_dumb_terminal(tmp_path, *args: str) -> tuple[int, str]:
    """``tessera ARGS`` on a pty with ``TERM=dumb``: its exit status and what the terminal got (stdout and stderr)."""
    import pexpect

    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TERM": "dumb"}
    env.pop("TESSERA_DEBUG", None)
    child = pexpect.spawn(str(SCRIPT), list(args), cwd=str(tmp_path), env=env, encoding="utf-8", timeout=180,
                          dimensions=(40, 120))
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus, child.before


def test_run_prints_its_steps_as_lines_on_a_dumb_terminal(tmp_path):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(f"name: tiny\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {CORPUS}, k: 3}}}}\n")
    status, said = on_a_dumb_terminal(tmp_path, "run", str(spec), "-q", "honey bees", "--top", "1")
    assert status == 0, said
    lines = said.split("\r\n")
    assert lines[0] == "[1/1] bm25 (retrieve.corpus_bm25) done, 3 rows", said  # no blank line before it
    assert lines[1] == "1: honey bees", said
    assert "\x1b[" not in said, said  # no colour, no cursor movement


def test_ingest_prints_lines_not_a_bar_of_carriage_returns_on_a_dumb_terminal(tmp_path):
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:40]), encoding="utf-8")
    status, said = on_a_dumb_terminal(tmp_path, "ingest", "--source", str(source), "--index", str(tmp_path / "idx"),
                                      "--no-dense", "--shard-size", "20")
    assert status == 0, said
    assert "\r" not in said.replace("\r\n", ""), said  # a bar redraws itself with carriage returns
    lines = said.split("\r\n")
    assert lines[:2] == ["staging: 40 docs", "ingest: 40 docs in 2 shard(s)"], said
    assert [line for line in lines if re.match(r"ingest: shard \d/2 committed", line)], said
    shutil.rmtree(tmp_path / "idx")


def test_run_says_it_reads_the_queries_from_the_terminal(tmp_path):
    """``tessera run FLOW -q -`` typed at a terminal waited for the queries without a word, as if it hung."""
    import pexpect

    spec = tmp_path / "tiny.yaml"
    spec.write_text(f"name: tiny\nsteps:\n  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {CORPUS}, k: 3}}}}\n")
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TERM": "dumb"}
    env.pop("TESSERA_DEBUG", None)
    child = pexpect.spawn(str(SCRIPT), ["run", str(spec), "-q", "-", "--top", "1"], cwd=str(tmp_path), env=env,
                          encoding="utf-8", timeout=60, dimensions=(40, 120))
    child.expect("tessera: reading the queries, one a line, from the terminal; Ctrl-D ends it, Ctrl-C cancels")
    child.sendline("honey bees")
    child.sendeof()
    child.expect("1: honey bees")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


@pytest.mark.parametrize("args, what", [
    (["index", "add", "idx", "-", "--no-dense"], "the documents, one JSON line each,"),
    (["flows", "save", "mine", "-"], "the spec \\(YAML or JSON\\)"),
])
def test_index_add_and_flows_save_say_they_read_the_terminal(tmp_path, args, what):
    """As ``tessera run -q -``: ``index add INDEX -`` and ``flows save NAME -`` at a terminal waited without a word."""
    import pexpect

    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TERM": "dumb"}
    env.pop("TESSERA_DEBUG", None)
    child = pexpect.spawn(str(SCRIPT), args, cwd=str(tmp_path), env=env, encoding="utf-8", timeout=60)
    child.expect(f"tessera: reading {what} from the terminal; Ctrl-D ends it, Ctrl-C cancels")
    child.sendeof()  # nothing typed: refused as empty, exit 2
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
