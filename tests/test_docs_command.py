"""``tessera docs``: the pages the messages point to, which a user of the wheel has no ``docs/`` folder for. Here on the
clone (its ``docs/``), in-process; tests/test_wheel.py runs it in an installed wheel. And the pointers themselves:
every page (and heading) a message names through ``see_docs`` exists, and no message names a page without saying
how to open it (``tessera docs PAGE``). Quick: the pages' text and the source's syntax trees; nothing is started."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from flows.commands.docs import headings, title
from tests.flows.test_cli import tessera_in_process

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGES = ("flows", "operators", "serve")
#: A page named as a path: ``docs/caching.md``.
PAGE_NAMED = re.compile(r"docs/[\w-]+\.md")


@pytest.fixture
def tessera(monkeypatch, capsys, tmp_path):
    return functools.partial(tessera_in_process, monkeypatch, capsys, home=tmp_path / "home", cwd=tmp_path)


def test_without_a_page_it_lists_each_page_with_its_first_heading(tessera):
    out = tessera("docs").stdout.splitlines()
    pages = sorted(DOCS.glob("*.md"))
    assert out[0] == f"{len(pages)} pages in {DOCS} (tessera docs PAGE prints one):", out
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in out[1:]}
    assert rows == {page.stem: title(page) for page in pages}
    assert rows["caching"] == "The step cache" and rows["cli"] == "The tessera command"
    assert tessera("docs", "--path").stdout == f"{DOCS}\n"


@pytest.mark.parametrize("given", ["caching", "caching.md", "docs/caching.md", "CACHING"])
def test_a_page_prints_whole_by_any_of_its_names(tessera, given):
    assert tessera("docs", given).stdout == (DOCS / "caching.md").read_text(encoding="utf-8")
    assert tessera("docs", given, "--path").stdout == f"{DOCS / 'caching.md'}\n"


def test_an_anchor_prints_its_section_up_to_the_next_heading_of_its_level(tessera):
    out = tessera("docs", "docs/cli.md#installed-from-a-wheel").stdout
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    start = text.index("## Installed from a wheel\n")
    assert out == text[start:text.index("\n## ", start) + 1]
    assert "```bash" in out  # the code block's '# ...' comments are no headings


def test_an_unknown_page_or_heading_is_one_line_naming_it_and_what_there_is(tessera):
    err = tessera("docs", "cachng", check=2).stderr.splitlines()
    pages = ", ".join(page.stem for page in sorted(DOCS.glob("*.md")))
    assert err == [f"tessera: error: field 'PAGE': no page 'cachng' in {DOCS} (did you mean 'caching'?); the pages: "
                   f"{pages}"]
    err = tessera("docs", "cli#installd-from-a-wheel", check=2).stderr.splitlines()
    assert err == ["tessera: error: field 'PAGE': no heading '#installd-from-a-wheel' in cli.md (did you mean "
                   "'installed-from-a-wheel'?): tessera docs cli prints the whole page"]


def pointers() -> list[tuple[str, str, str]]:
    """(where, page, heading) of each ``see_docs(PAGE[, HEADING])`` in the packages' source."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "see_docs":
                    args = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
                    assert len(args) == len(node.args) >= 1, f"{path}:{node.lineno}: see_docs of a computed page"
                    found.append((f"{path.relative_to(ROOT)}:{node.lineno}", args[0], (args[1:] or [""])[0]))
    return found


def test_every_page_and_heading_a_message_points_to_exists():
    found = pointers()
    assert len(found) >= 25, found  # the scan finds them
    texts = {path.stem: path.read_text(encoding="utf-8") for path in DOCS.glob("*.md")}
    wrong = [f"{where}: no page docs/{page}.md" for where, page, _ in found if page not in texts]
    wrong += [f"{where}: no heading '{heading}' in docs/{page}.md" for where, page, heading in found
              if heading and page in texts and not re.search(rf"^#+ +{re.escape(heading)} *$", texts[page], re.M)]
    assert not wrong, wrong


def test_no_message_names_a_page_without_saying_how_to_open_it():
    """A message's ``docs/llm.md`` led nowhere for a user of the wheel: each says ``tessera docs llm`` too
    (``see_docs``). Docstrings and comments are for the code's readers, who have the clone."""
    bare = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
            bare += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:80]!r}" for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                     and PAGE_NAMED.search(node.value) and "tessera docs" not in node.value]
    assert not bare, f"name the page with operators.errors.see_docs: {bare}"


def test_a_pointer_says_the_page_and_the_command_that_prints_it():
    from operators.errors import see_docs

    assert see_docs("llm") == "docs/llm.md (`tessera docs llm`)"
    assert see_docs("llm", "Model aliases") == "docs/llm.md, Model aliases (`tessera docs llm`)"


def test_the_headings_anchors_are_githubs():
    marks = [slug for _, _, slug in headings("# A `b`: c\n```\n# not one\n```\n## A `b`: c\n### Deux mots\n")]
    assert marks == ["a-b-c", "a-b-c-1", "deux-mots"]
