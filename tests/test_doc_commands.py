"""Every ``tessera`` command line the pages show in a code block (README.md, docs/*.md, cluster/README.md) is one the
command line takes: its command, options and their values pass the parser, so an option renamed or removed cannot
leave a page's example behind. Synopsis lines (``[--json]``, ``a | b``, ``<each variant>``) are left out; nothing is
run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "cluster" / "README.md"]
BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SHELL_ENDS = ("|", "&", "&&", "||", ";", ">", ">>", "<", "2>&1")


def shown_commands(page: Path) -> list[str]:
    """The ``tessera ...`` lines of ``page``'s code blocks, continuation lines joined, synopses left out."""
    found = []
    for block in BLOCK.finditer(page.read_text(encoding="utf-8")):
        for line in re.sub(r"\\\n\s*", " ", block.group(1)).splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("tessera ") and not re.search(r" \[|\s\|\s|<\w", line.split(" #")[0]):
                found.append(line)
    return found


def test_the_pages_show_commands():
    shown = {str(page.relative_to(ROOT)): len(shown_commands(page)) for page in PAGES}
    assert shown["README.md"] >= 5 and shown["docs/caching.md"] >= 5, shown


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_command_a_page_shows_is_one_the_parser_takes(page, capsys):
    from flows.commands import build_parser

    refused = []
    for line in shown_commands(page):
        words = shlex.split(line, comments=True)
        words = words[:next((i for i, word in enumerate(words) if word in SHELL_ENDS), len(words))]
        try:
            build_parser().parse_args(words[1:])
        except SystemExit as stop:
            if stop.code:
                refused.append(f"{line}\n    {capsys.readouterr().err.strip().splitlines()[-1]}")
    assert not refused, f"{page.relative_to(ROOT)} shows commands the command line refuses:\n" + "\n".join(refused)
