"""PyYAML's errors said on one line, for the files Tessera reads as YAML (flow specs, the models file): its own text
spreads over lines, with ``in "<unicode string>"`` and a snippet under a caret, names a tab only as a character
"that cannot start any token", and says a missing colon or a slip of indentation in a parser's words ("mapping
values are not allowed here", "expected <block end>"), often at the line after the slip."""

from __future__ import annotations

import re

import yaml

#: A key and its colon with no space after it (``op:bm25``): YAML reads the whole as one text, not a key.
_NO_SPACE = re.compile(r"^\s*(?:-\s+)?[\w.-]+:[^\s:]")


def syntax_hint(err: BaseException) -> str:
    """What PyYAML's problem most often means, and on which line: a tab; a key without its colon, or without the
    space after it, on the line above; a line indented more or less than the keys beside it; two ``key: `` on one
    line; text after a value in braces (a prompt left unquoted). Empty where no such slip is seen (the problem is
    said alone)."""
    problem = getattr(err, "problem", None) or ""
    if "'\\t'" in problem:
        return "; YAML indents with spaces, not tabs: replace the tab with spaces"
    mark = getattr(err, "problem_mark", None)
    lines = (getattr(mark, "buffer", None) or "").rstrip("\0").split("\n")
    if mark is None or mark.line >= len(lines):
        return ""
    if problem == "mapping values are not allowed here":
        return _colon_hint(lines, mark.line, mark.column)
    context = getattr(err, "context_mark", None)
    if problem == "could not find expected ':'" and context is not None and context.line < len(lines):
        return f"; line {context.line + 1} ({lines[context.line].strip()!r}) has no ':' after its key"
    if problem.startswith("expected <block end>, but found"):
        if hint := _text_after_braces(lines[mark.line], mark.column):
            return f"; line {mark.line + 1}{hint}"
        if problem.endswith("'-'"):
            return (f"; line {mark.line + 1} is a list item ('- ') among the keys of a mapping: a list goes below a "
                    "key (key:, then its items indented below it)")
        return _key_above_hint(lines, mark.line) or (f"; line {mark.line + 1} does not line up with the lines above "
                                                     "it: the keys of one mapping are indented alike, with spaces")
    return ""


#: A value that begins with braces or brackets (``prompt: {context} Answer: {query}``, ``- [1] first``): a mapping or
#: a list to YAML, and the text after its closing one is no YAML.
_OPENED_VALUE = re.compile(r"^\s*(?:-\s+)?(?:[^\s:#{\[][^:#]*:\s+)?([{\[])")


def _text_after_braces(line: str, column: int) -> str:
    """Why a line whose value begins with ``{`` or ``[`` has text after the closing one, that YAML stopped at; empty
    for any other line. A prompt written as it is sent (``{context} Answer: {query}``) most often."""
    opened = _OPENED_VALUE.match(line)
    if opened is None or "}]"["{[".index(opened[1])] not in line[opened.end():column]:
        return ""
    shown = " ".join(line[opened.start(1):].split())
    shown = shown if len(shown) <= 40 else shown[:40] + "..."
    return (f": a value that begins with '{opened[1]}' is a {'mapping' if opened[1] == '{' else 'list'} to YAML, and "
            f"text after its closing '{'}]'['{['.index(opened[1])]}' is no YAML; put text in quotes (\"{shown}\")")


def _colon_hint(lines: list[str], line: int, column: int) -> str:
    """"mapping values are not allowed here": a second ``key: `` on the line, or a slip on a line above it that made
    YAML read both lines as one text (a key with no colon, ``op:bm25``, a line indented further than the one above)."""
    if ": " in lines[line][:column].strip():
        return (f"; line {line + 1} holds a value with ': ' in it: a mapping as a value goes in braces ({{op: "
                "bm25}) or on lines of its own below its key, and text with ': ' in it in quotes")
    if hint := _key_above_hint(lines, line):
        return hint
    above = _line_above(lines, line)
    if above is not None and _indent(lines[line]) > _indent(lines[above]):
        return (f"; line {line + 1} is indented more than line {above + 1}: the keys of one mapping are indented "
                "alike")
    return ""


def _key_above_hint(lines: list[str], line: int) -> str:
    """The line above ``line`` (comments and blank lines skipped) as a key without its colon, or without the space
    after it (``op:bm25``); empty if it is neither."""
    above = _line_above(lines, line)
    if above is None:
        return ""
    text = lines[above].strip()
    if _NO_SPACE.match(lines[above]):
        return f"; line {above + 1} ({text!r}): put a space after a key's colon (key: value)"
    if ":" not in text and not text.startswith(("-", "{", "[", "}", "]")):
        return f"; line {above + 1} ({text!r}) has no ':' after its key"
    return ""


def _line_above(lines: list[str], line: int) -> int | None:
    return next((i for i in range(line - 1, -1, -1) if lines[i].strip() and not lines[i].lstrip().startswith("#")),
                None)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def yaml_problem(err: BaseException) -> str:
    """PyYAML's problem and where (line and column), on one line, with what it most often means (``syntax_hint``)."""
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    if mark is None or not problem:
        return " ".join(str(err).split())
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1}){syntax_hint(err)}"


class DaysAsWritten(yaml.SafeLoader):
    """PyYAML's safe loader, but a scalar that looks like a date and names no day (``2024-02-30``, ``2021-13-01``) is
    its text, as if quoted: PyYAML raised a bare ``ValueError`` for it (an internal error of ``tessera run``), where
    the text reaches the check that names its field (a filter's ``date_from: must be a valid date``)."""

    def construct_yaml_timestamp(self, node):
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError:
            return self.construct_scalar(node)


DaysAsWritten.add_constructor("tag:yaml.org,2002:timestamp", DaysAsWritten.construct_yaml_timestamp)
