"""Every ``tessera`` command line, and every job entry point (``python -m flows.run`` and the others, alone or after
``ray job submit ... --``), that the pages show in a code block (README.md, docs/*.md, cluster/README.md) is one the
command line takes: its command, options and their values pass the parser, so an option renamed or removed cannot
leave a page's example behind. Synopsis lines (``[--json]``, ``a | b``, ``<each variant>``, ``...``) are left out;
nothing is run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "cluster" / "README.md"]
BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SHELL_ENDS = ("|", "&", "&&", "||", ";", ">", ">>", "<", "2>&1")
JOB = re.compile(r"(?:^|-- )python -m (flows\.(run|ingest|bench|train))(\s.*|$)")


def shown_commands(page: Path) -> list[str]:
    """The ``tessera ...`` lines of ``page``'s code blocks, and their job entry points as ``flows.run ...``,
    continuation lines joined, synopses left out."""
    found = []
    for block in BLOCK.finditer(page.read_text(encoding="utf-8")):
        for line in re.sub(r"\\\n\s*", " ", block.group(1)).splitlines():
            line = line.strip().removeprefix("$ ")
            job = JOB.search(line)
            line = f"{job.group(1)}{job.group(3)}" if job else line
            if line.startswith(("tessera ", "flows.")) and not re.search(r" \[|\s\|\s|<\w|\.\.\.", line.split(" #")[0]):
                found.append(line)
    return found


def test_the_pages_show_commands():
    shown = {str(page.relative_to(ROOT)): len(shown_commands(page)) for page in PAGES}
    assert shown["README.md"] >= 5 and shown["docs/caching.md"] >= 5, shown


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_command_a_page_shows_is_one_the_parser_takes(page, capsys):
    refused = []
    for line in shown_commands(page):
        words = shlex.split(line, comments=True)
        words = words[:next((i for i, word in enumerate(words) if word in SHELL_ENDS), len(words))]
        try:
            parser(words[0]).parse_args(words[1:])
        except SystemExit as stop:
            if stop.code:
                refused.append(f"{line}\n    {capsys.readouterr().err.strip().splitlines()[-1]}")
    assert not refused, f"{page.relative_to(ROOT)} shows commands the command line refuses:\n" + "\n".join(refused)


def parser(command: str):
    """``tessera``'s parser, or a job entry point's as ``standalone_main`` builds it (``flows.run``: its module's
    ``add_arguments`` and ``--debug``)."""
    import importlib

    from flows.commands import _Parser, build_parser

    if command == "tessera":
        return build_parser()
    job = _Parser(prog=f"python -m {command}")
    module = importlib.import_module(f"flows.commands.{command.split('.')[1]}")
    if command in ("flows.run", "flows.ingest"):  # Ray executor by default
        module.add_arguments(job, default_executor="ray")
    else:
        module.add_arguments(job)
    job.add_argument("--debug", action="store_true")
    return job
