"""``tessera docs [PAGE] [--path]``: the documentation pages that the messages point to (``docs/llm.md (`tessera docs
llm`)``). A wheel has no ``docs/`` folder for a message to send its user to: it installs the pages in its prefix's
``share/tessera/docs`` (pyproject.toml's data-files), and this command reads them there, or a clone's ``docs/``.
"""

from __future__ import annotations

import argparse
import re
import sys
import sysconfig
from pathlib import Path, PurePosixPath

from flows.commands._support import EXIT_OK, CliError

#: Where the wheel installs the pages, below its prefix (the venv's folder): [tool.setuptools.data-files].
INSTALLED = Path("share", "tessera", "docs")
#: The clone this package runs from, if it is one (editable or PYTHONPATH): its root holds pyproject.toml and docs/.
CLONE = Path(__file__).resolve().parents[2]
#: A heading line of a page: its level and its text.
HEADING = re.compile(r"(#{1,6}) +(.+?) *#*$")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser("docs", parents=[common], help="list or print the documentation pages",
                            description="The documentation pages that messages name (docs/caching.md: tessera docs "
                            "caching), from a clone's docs/ or from where the wheel installed them.")
    parser.add_argument("page", nargs="?", metavar="PAGE",
                        help="the page to print (tessera docs caching; also caching.md, docs/caching.md; with "
                        "#anchor: that section); without it, the list of pages and their titles")
    parser.add_argument("--path", action="store_true",
                        help="print the page's path instead (without PAGE: the pages' folder)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    folder = pages_folder()
    if args.page is None:
        print(folder if args.path else listing(folder))
        return EXIT_OK
    given, _, anchor = args.page.partition("#")
    path = page_path(folder, given)
    if args.path:
        print(path)
        return EXIT_OK
    text = path.read_text(encoding="utf-8")
    sys.stdout.write(section(text, anchor, path.name) if anchor else text)
    return EXIT_OK


def pages_folder() -> Path:
    """The clone's ``docs/`` when this package runs from one, else the pages the installed wheel put in its prefix."""
    if (CLONE / "pyproject.toml").is_file() and (CLONE / "docs").is_dir():
        return CLONE / "docs"
    installed = _installed_folder()
    if installed is None:
        expected = Path(sysconfig.get_path("data"), INSTALLED)
        raise CliError(f"the documentation pages are not installed here (no {expected}, nor a clone's docs/ beside "
                       f"{CLONE}): reinstall Tessera from its wheel, which puts them there")
    return installed


def _installed_folder() -> Path | None:
    """Where the wheel's record puts ``share/tessera/docs`` (a ``--user`` or ``--prefix`` install too), else the
    running Python's data folder's."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        files = distribution("tessera").files or []
    except PackageNotFoundError:
        files = []
    for file in files:
        if file.suffix == ".md" and tuple(file.parts[-4:-1]) == INSTALLED.parts:
            folder = Path(file.locate()).resolve().parent
            if folder.is_dir():
                return folder
    folder = Path(sysconfig.get_path("data"), INSTALLED)
    return folder if folder.is_dir() else None


def pages(folder: Path) -> dict[str, Path]:
    """Each page by its name without ``.md`` (``caching``; ``README``, the index)."""
    return {path.stem: path for path in sorted(folder.glob("*.md"))}


def page_path(folder: Path, given: str) -> Path:
    """The page ``given`` names (``caching``, ``caching.md``, ``docs/caching.md``; any case), or the error naming
    the pages there are."""
    known = pages(folder)
    name = PurePosixPath(given.strip().replace("\\", "/")).name.removesuffix(".md")
    found = {stem.lower(): path for stem, path in known.items()}.get(name.lower())
    if found is None:
        from operators.errors import close_names, did_you_mean

        hint = did_you_mean(close_names(name, known))
        raise CliError(f"no page '{given}' in {folder}{f' ({hint})' if hint else ''}; the pages: "
                       f"{', '.join(known)}", field="PAGE")
    return found


def title(path: Path) -> str:
    """A page's first heading (``# The step cache``) without its ``#``s and code marks."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if found := HEADING.match(line):
            return found.group(2).replace("`", "")
    return ""


def listing(folder: Path) -> str:
    known = pages(folder)
    width = max(map(len, known), default=0)
    rows = [f"  {name:<{width}}  {title(path)}" for name, path in known.items()]
    return "\n".join([f"{len(known)} pages in {folder} (tessera docs PAGE prints one):", *rows])


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line, level, GitHub's anchor) of each heading outside code blocks; a repeated anchor gets ``-1``, ``-2``..."""
    found, seen, fenced = [], {}, False
    for number, line in enumerate(text.splitlines()):
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            slug = re.sub(r"[^\w\- ]", "", match.group(2).strip().lower()).replace(" ", "-")
            seen[slug] = seen.get(slug, -1) + 1
            found.append((number, len(match.group(1)), f"{slug}-{seen[slug]}" if seen[slug] else slug))
    return found


def section(text: str, anchor: str, name: str) -> str:
    """The part of a page from the heading of ``anchor`` to the next heading of its level or above."""
    marks = headings(text)
    start = next(((line, level) for line, level, slug in marks if slug == anchor.lower()), None)
    if start is None:
        from operators.errors import close_names, did_you_mean

        hint = did_you_mean(close_names(anchor, [slug for _, _, slug in marks]))
        raise CliError(f"no heading '#{anchor}' in {name}{f' ({hint})' if hint else ''}: tessera docs "
                       f"{name.removesuffix('.md')} prints the whole page", field="PAGE")
    end = next((line for line, level, _ in marks if line > start[0] and level <= start[1]), None)
    lines = text.splitlines(keepends=True)
    return "".join(lines[start[0]:end])
