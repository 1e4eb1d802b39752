"""A document of one text file: plain text, Markdown or HTML, decoded as UTF-8, with its title.

Shared by ``sources.files`` (``tessera ingest``) and the service's file uploads (``serve.indices.documents``), so a
file gives the same document either way. The HTML is read by ``operators.sources.html_text``, a Markdown file's front
matter by PyYAML.
"""

from __future__ import annotations

import codecs
import datetime
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, NamedTuple

from operators.errors import SourceError
from operators.metadata_columns import FILE_RESERVED, metadata_fields, name_rule
from operators.sources.encoding import FileDecoder, save_as_utf8, shown, utf16_without_bom
from operators.sources.html_text import html_text

TEXT_SUFFIXES = (".txt",)
MARKDOWN_SUFFIXES = (".md", ".markdown")
HTML_SUFFIXES = (".html", ".htm")
#: Every suffix ``read_text_file`` reads (case does not matter).
SUFFIXES = TEXT_SUFFIXES + MARKDOWN_SUFFIXES + HTML_SUFFIXES
_NOT_TEXT = {"Cc", "Cf", "Cs", "Cn"}  # control, format, surrogate and unassigned characters


class Decoded(NamedTuple):
    """A whole file's text, the encoding guessed for it (None: UTF-8, or the one given), and where UTF-8 text held
    its first byte that is not UTF-8 (offset, value; None: it had none), which the service's upload tells its
    client."""

    text: str
    guessed: str | None = None
    stray: tuple[int, int] | None = None


def decode_guessing(content: bytes, name: str, *, op: Any = None, encoding: str | None = None) -> Decoded:
    """``content`` as text: UTF-8 (a byte-order mark dropped), else in the ``encoding`` given, else in the one
    guessed for it (``encoding.FileDecoder``: a warning names the file). Bytes it cannot read are a
    ``SourceError`` naming the file and the first bad byte (from 1, as the warnings count), or a NUL byte where there
    is one: a binary file under a text file's name, for which an encoding is no help."""
    bom = 0
    if encoding is None or codecs.lookup(encoding).name == "utf-8":
        bom = len(codecs.BOM_UTF8) if content.startswith(codecs.BOM_UTF8) else 0
        content = content[bom:]
    if encoding is None and (wide := utf16_without_bom(content, name, op)) is not None:  # valid UTF-8, NULs and all
        return Decoded(*wide)
    decoder = FileDecoder(name, encoding, lines=False, op=op)
    try:
        text = decoder(content)
        stray = None if decoder.stray is None else (decoder.stray[0] + bom, decoder.stray[1])  # offset in the file
        return Decoded(text, decoder.guessed, stray)
    except UnicodeDecodeError as err:
        where = {"op": getattr(op, "name", None), "step": getattr(op, "step_id", None)}
        if (nul := content.find(b"\0")) >= 0:  # no text file holds one (UTF-16's are read above): an image, an archive
            raise SourceError(f"'{name}' holds binary data, not text (a NUL byte at byte {nul + 1 + bom}, as in an "
                              "image or an archive)", **where) from None
        hint = "save it as UTF-8" if op is None else "give its encoding (tessera ingest --encoding) or save it as UTF-8"
        raise SourceError(f"'{name}' is not {shown(encoding)} text ({err.reason}, at byte {err.start + 1 + bom}); "
                          f"{hint}", **where) from None


@dataclass(frozen=True)
class TextFile:
    """One text file's document: its title (None when it has none of its own), text, metadata fields (a Markdown
    file's front matter's, by name, as ``metadata_columns.metadata_fields`` keeps them), the names of the front
    matter's fields left out, and the encoding guessed for a file that is not UTF-8 (None: UTF-8, or the one
    given)."""

    title: str | None
    text: str
    fields: dict[str, Any] = field(default_factory=dict)
    guessed_encoding: str | None = None
    left_out: tuple[str, ...] = ()
    #: Why a Markdown file's front matter was not read (not valid YAML: it stays in the text), else None.
    front_matter_problem: str | None = None
    #: The first byte of UTF-8 text that is not UTF-8, read as U+FFFD: (offset in the file, value), else None.
    stray_byte: tuple[int, int] | None = None
    #: A plain text file that reads as a table of tab-separated values: (lines, fields), else None.
    table_shape: tuple[int, int] | None = None

    @property
    def has_text(self) -> bool:
        """Whether the text holds a character to read: one that is not white space nor a control or format
        character (a file of NUL or other control bytes decodes as UTF-8, and would be indexed as a passage)."""
        return any(not char.isspace() and unicodedata.category(char) not in _NOT_TEXT for char in self.text)

    def left_out_message(self, name: str) -> str | None:
        """What was left out of the front matter and why, for the log (``tessera ingest``) or the client (an
        upload's ``warnings``); None when nothing was."""
        if self.front_matter_problem is not None:
            return (f"{name}: its front matter is not valid YAML ({self.front_matter_problem}): it is kept in the "
                    "text, and gives no title nor fields")
        if not self.left_out:
            return None
        return f"{name}: front matter field(s) {', '.join(self.left_out)} left out: {name_rule(FILE_RESERVED)}"

    def table_message(self, name: str) -> str | None:
        """Why a text file that holds a sheet (tab-separated; UTF-16 with its mark is refused: ``unicode_text_sheet``)
        is one document, and how to read it a document per row; None for any other file."""
        if self.table_shape is None:
            return None
        lines, fields = self.table_shape
        return (f"{name}: reads as a table ({lines} lines of {fields} tab-separated fields, as a sheet saved as "
                "text is), read as one document; for a document per row, save the sheet as CSV UTF-8 and read "
                "that .csv (its header row names the id and text columns)")


def tab_table(text: str) -> tuple[int, int] | None:
    """(lines, fields) where every line of ``text`` that is not blank, two or more, holds the same number of tabs,
    one or more, and none starts with one (code indented by tabs is no table). None otherwise."""
    lines = [line for line in text.split("\n") if line.strip()]
    tabs = {line.count("\t") for line in lines}
    if len(lines) < 2 or len(tabs) != 1 or 0 in tabs or any(line.startswith("\t") for line in lines):
        return None
    return len(lines), tabs.pop() + 1


def read_text_file(name: str, content: bytes, *, op: Any = None, encoding: str | None = None) -> TextFile:
    """The document of the file ``name`` holding ``content``: a Markdown file's title is its front matter's
    ``title:`` or its first heading, and its front matter's other fields are its metadata fields, those a
    metadata column may hold (``metadata_columns.metadata_fields``: one rule for ``tessera ingest`` and the
    service's upload), and the front matter is not in its text; an HTML file's title is its ``<title>`` (else its
    first ``<h1>``) and its text that of its body; a plain text file has no title. Its suffix is one of
    ``SUFFIXES``; ``encoding``: its bytes' (None: UTF-8, else a guess, ``decode_guessing``). Line ends read as
    Python's universal newlines read them (``\r\n`` and ``\r`` as ``\n``): the same file saved on Windows and on
    Linux is the same document, and no ``\r`` reaches the index, a snippet or a model's context."""
    text, guessed, stray = decode_guessing(content, name, op=op, encoding=encoding)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    suffix = PurePath(name).suffix.lower()
    if suffix in HTML_SUFFIXES:
        return TextFile(*html_text(text), guessed_encoding=guessed, stray_byte=stray)
    if suffix in MARKDOWN_SUFFIXES:
        fields, text, problem = front_matter(text)
        title = fields.pop("title", None)
        title = str(title).strip() if isinstance(title, (str, int, float)) and str(title).strip() else None
        kept, left_out = metadata_fields(fields)
        return TextFile(title or markdown_title(text), text, kept, guessed, tuple(left_out), problem, stray)
    shape = tab_table(text)
    if shape is not None and content.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise SourceError(unicode_text_sheet(name, content, shape), op=getattr(op, "name", None),
                          step=getattr(op, "step_id", None))
    return TextFile(None, text, guessed_encoding=guessed, stray_byte=stray, table_shape=shape)


def unicode_text_sheet(name: str, content: bytes, shape: tuple[int, int]) -> str:
    """Why a plain text file in UTF-16 with its byte-order mark whose lines are a table (``tab_table``) is not read:
    it is a sheet Excel saved as "Unicode Text", whose rows read as one document made one search hit of the whole
    sheet (its id and title columns text), where the user meant a document per row; the CSV reader reads that once
    the file is UTF-8 (it refuses UTF-16: a line reader). A failure of the file (an upload's 422) that says so."""
    lines, fields = shape
    return (f"'{name}' is UTF-16 tab-separated text ({lines} lines of {fields} fields), as Excel saves a sheet as "
            "Unicode Text: not read as one document; for a document per row save the sheet as CSV UTF-8, or "
            f"{save_as_utf8(content, 'it, named .tsv,')}")


# -- Markdown -------------------------------------------------------------------------------------------

_FRONT_MATTER = re.compile(r"---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)


def front_matter(text: str) -> tuple[dict[str, Any], str, str | None]:
    """A Markdown text's YAML front matter (between ``---`` lines at its top) as fields, the text after it, and why
    it was not read (None: it was, or there is none). Dates are ISO text. Front matter that is not valid YAML stays
    in the text, and the reason goes to whoever reads the file (a log line of ``tessera ingest``, an upload's
    ``warnings``); a block that YAML reads as no mapping (a rule, then a paragraph) is no front matter."""
    import yaml

    from operators.yaml_text import DaysAsWritten

    found = _FRONT_MATTER.match(text)
    if found is None:
        return {}, text, None
    try:
        fields = yaml.load(found.group(1), Loader=DaysAsWritten)  # date: 2024-02-30 as its text
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""
        return {}, text, f"{getattr(err, 'problem', None) or type(err).__name__}{at}"
    if fields is not None and not isinstance(fields, dict):
        return {}, text, None
    return {str(key): _plain(value) for key, value in (fields or {}).items()}, text[found.end():], None


def _plain(value: Any) -> Any:
    """A YAML value as JSON would hold it: a date its ISO text, in lists and mappings too."""
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


def markdown_title(text: str) -> str | None:
    """The text of a Markdown document's first heading (``# Title``, or a line underlined with ``===``/``---``),
    outside code fences and after a block that looks like front matter (``read_text_file`` reads its title). None
    without one."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # front matter: --- ... ---, its closing line is no underline
        end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() in ("---", "...")), None)
        if end is not None:
            lines = lines[end + 1:]
    fence, previous = None, ""
    for line in lines:
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence, previous = opened.group(1), ""
            continue
        heading = _ATX.match(line)
        if heading and heading.group(1).strip():
            return heading.group(1).strip()
        if _SETEXT.match(line) and previous.strip() and not previous.startswith(("    ", "\t")):
            return previous.strip()
        previous = line
    return None
