"""Text files that are not UTF-8: read with the encoding given, or with the one charset-normalizer guesses.

A file is read as UTF-8 where it is UTF-8, so a valid UTF-8 file never changes. Where its bytes are not UTF-8 (a
Latin-1 or Windows-1252 export), and no encoding was given, the file's encoding is guessed once, from its first
bytes and the bytes that are not UTF-8, by charset-normalizer; among the encodings it ranks equally Windows-1252
wins (its Western European text decodes alike in many code pages, and charset-normalizer's own order put Central
European cp1250 first: ``très`` read as ``trčs``), as it does for a text whose every byte over 127 it reads as a
Western letter, whatever code page ranks first (``_western``); but for bytes that suit Windows-1250 better: Polish
or Czech, where Windows-1252 puts a symbol inside a word (``mas³o``), which charset-normalizer, in a short text,
ties with Windows-1252, reads as CJK or as UTF-16 (``_central_european``). A warning names each file read with a
guessed encoding. Given an encoding (``encoding`` param, ``tessera ingest --encoding``), every byte is read with it
and nothing is guessed. UTF-8 text with a few bytes that are not UTF-8 (a damaged file, a stray byte pasted in)
stays UTF-8, each such byte read as U+FFFD, with a warning (``_utf8_with_stray_bytes``).
"""

from __future__ import annotations

import codecs
import logging
from typing import Any

from operators.errors import SourceError

log = logging.getLogger("tessera.sources")

#: Bytes of a file's start that a guess reads (besides those that are not UTF-8).
GUESS_BYTES = 1 << 16
#: Characters a line-by-line reader (JSONL, CSV) splits and parses on: an encoding must write them as ASCII does.
_LINE_SYNTAX = '\n\r,;\t"{}[]:'
#: Byte-order marks of UTF-32 and UTF-16 and what they say, longest first (UTF-32 LE's begins with UTF-16 LE's):
#: a guess of either encoding is taken only for a file that starts with one, and a line reader refuses such a file.
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))
_WIDE_BOMS = tuple(bom for bom, _ in _BOMS)
#: The encoding taken among those charset-normalizer ranks equally, or nearly: within ``_NEAR_CHAOS`` of the best
#: one's "chaos" (its mess measure). A French CSV in Windows-1252 measured 0.016-0.022 there against 0.0 for
#: Baltic cp1257, which was taken (``très`` read as ``trčs``); cp775 (Baltic DOS) came at 0.044-0.069.
_PREFERRED = "cp1252"
_NEAR_CHAOS = 0.03
#: The encoding taken instead where the bytes suit it (``_central_european``).
_CENTRAL = "cp1250"
#: What Windows-1252 reads Western European text's bytes over 127 as: its accented letters and typography. A text
#: whose every such byte is one of them is read as Windows-1252 whatever single-byte code page was guessed
#: (``_western``); Baltic, Turkish or Icelandic text has a byte Windows-1252 reads as another sign (``š`` as ``ð``,
#: ``ş`` as ``þ``).
_WESTERN = frozenset("àâäáãåæçéèêëíìîïñóòôöõøœùûüúÿßÀÂÄÁÃÅÆÇÉÈÊËÍÌÎÏÑÓÒÔÖÕØŒÙÛÜÚŸ€£©®°«»–—‘’“”…·")


def check_encoding(name: str | None, *, lines: bool, op: Any = None) -> str | None:
    """``name``, a codec Python knows (None: UTF-8, guessing for a file that is not), else a ``SourceError`` naming
    ``params.encoding``; for a reader of lines (``lines``), one that writes newlines and quotes as ASCII does."""
    if name is None:
        return None
    try:
        codec = codecs.lookup(name)
    except LookupError:
        raise SourceError(f"unknown encoding '{name}' (e.g. utf-8, cp1252, latin-1, shift_jis)",
                          op=getattr(op, "name", None), step=getattr(op, "step_id", None),
                          field="params.encoding") from None
    if lines and _LINE_SYNTAX.encode(codec.name, "replace") != _LINE_SYNTAX.encode("ascii"):
        raise SourceError(f"encoding '{name}' is not read line by line (its newlines are not one byte); convert "
                          "the file to UTF-8 (iconv -f ENCODING -t UTF-8)", op=getattr(op, "name", None),
                          step=getattr(op, "step_id", None), field="params.encoding")
    return codec.name


#: The ``encoding`` param's description, in every source that reads text files.
ENCODING_HELP = ("The files' text encoding (`cp1252`, `latin-1`, `shift_jis`...). Default: UTF-8, and for a file "
                 "that is not UTF-8 the encoding charset-normalizer guesses, named in a warning.")


def encoding_param():
    """A pydantic validator of a source's ``encoding`` param: a codec Python knows (``check_encoding``), else a
    params error. Whether a line reader can use it is checked by ``Source.validate_params``, as the source
    declares (``Source.reads_lines``)."""
    from pydantic import field_validator

    def check(cls, value: str | None) -> str | None:
        try:
            return check_encoding(value, lines=False)
        except SourceError as err:
            raise ValueError(err.message) from None

    return field_validator("encoding")(check)


def guess_encoding(sample: bytes, *, lines: bool) -> str | None:
    """The encoding charset-normalizer finds for ``sample`` (Windows-1252 where it ranks it first among equals),
    or None when it finds none (or, for ``lines``, only one a line reader cannot split)."""
    from charset_normalizer import from_bytes
    from charset_normalizer.utils import is_multi_byte_encoding

    found = from_bytes(sample)
    best = found.best()
    name = None
    if best is not None:
        near = [m for m in found if m.chaos <= best.chaos + _NEAR_CHAOS]
        name = _PREFERRED if any(_PREFERRED in m.could_be_from_charset for m in near) else best.encoding
        if name.startswith(("utf_16", "utf_32")) and not sample.startswith(_WIDE_BOMS):
            name = None  # without its byte-order mark, a "UTF-16" guess reads bytes that are no text as CJK
    if name not in (None, _PREFERRED, _CENTRAL) and not is_multi_byte_encoding(name) and _western(sample):
        name = _PREFERRED  # a French JSON line's "très bien café crème brûlée" measured cleaner as Baltic cp1257
    if name in (None, _PREFERRED) or (is_multi_byte_encoding(name) and _mostly_latin(sample)):
        name = _CENTRAL if _central_european(sample) else name
    if name is None:
        return None
    if lines:
        try:
            check_encoding(name, lines=True)
        except SourceError:
            return None
    return name


def _western(sample: bytes) -> bool:
    """Whether ``sample``'s bytes over 127 all read as Western European letters or typography in Windows-1252."""
    text = sample.decode(_PREFERRED, errors="replace")
    return any(ord(c) > 127 for c in text) and all(c in _WESTERN for c in text if ord(c) > 127)


def _central_european(sample: bytes) -> bool:
    """Whether ``sample`` reads as Windows-1250 text (Polish, Czech...) rather than Windows-1252: every byte the
    two read differently is a letter in Windows-1250, and Windows-1252 puts a symbol after a letter somewhere
    (``mas³o``, ``M¹¿``, ``ksi¹¿ka``). charset-normalizer cannot tell them apart in a short text: it ranks them
    equally (Windows-1252 is taken then) or reads a few Polish words as Chinese or as UTF-16 (no guess). A
    Western text is kept: its accented letters (``très``, ``Über``) are letters in both, and ``¿`` or ``£`` starts a
    word."""
    try:
        central = sample.decode(_CENTRAL)
    except UnicodeDecodeError:
        return False
    western = sample.decode(_PREFERRED, errors="replace")
    symbol_in_word = False
    for i, (c, w) in enumerate(zip(central, western)):
        if c == w:
            continue
        if not c.isalpha():
            return False
        symbol_in_word |= not w.isalpha() and i > 0 and central[i - 1].isalpha()
    return symbol_in_word


def _not_utf8_lines(head: bytes) -> bytes:
    """The lines of ``head`` that are not UTF-8, each ended by a newline: what a guess reads of a file's first lines.
    The UTF-8 lines of a mixed file (an export appended to in two encodings) say nothing of the others' encoding,
    and their letters made charset-normalizer take a French Windows-1252 line for Baltic cp1257 (``trčs``)."""
    kept = []
    for line in head.split(b"\n"):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            kept.append(line + b"\n")
    return b"".join(kept)


def _utf8_with_stray_bytes(raw: bytes) -> str | None:
    """``raw``'s text when, not UTF-8, it is UTF-8 text with a few damaged bytes (each read as U+FFFD), else None: it
    holds characters only UTF-8 encodes in several bytes (``Zürich`` as ``5a c3 bc``), which a single-byte code page
    would read as two symbols (``ZĂĽrich``), and they outnumber the bytes that are not UTF-8. Read in a guessed code
    page, its every accented letter was mangled for the sake of one stray byte."""
    text = raw.decode("utf-8", errors="replace")
    stray = text.count("\ufffd")
    return text if sum(ord(c) > 127 for c in text) - stray > stray else None


def _mostly_latin(sample: bytes) -> bool:
    """Whether ASCII letters outnumber the bytes that are not ASCII: a Latin-script text with a few accented
    letters, not Chinese, Japanese or Korean (whose every character is bytes that are not ASCII), where a guess of
    a CJK encoding is not to be second-guessed."""
    letters = sum(65 <= b <= 90 or 97 <= b <= 122 for b in sample)
    return letters > sum(b >= 128 for b in sample)


def wide_encoding(head: bytes) -> tuple[str, str] | None:
    """``(encoding, why it is taken for it)`` when a file starting with ``head`` is UTF-16 or UTF-32: it opens with
    their byte-order mark, or it is UTF-16 without one, whose Latin text has a NUL as every other byte (valid
    UTF-8, so read as UTF-8 it was a text of NULs that no search finds). The names are iconv's and Python's."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, "it starts with its byte-order mark"
    half = min(len(head), 1024) // 2
    even, odd = head[0:2 * half:2], head[1:2 * half:2]
    for low, high, name in ((even, odd, "UTF-16LE"), (odd, even, "UTF-16BE")):
        latin = [b for b, h in zip(low, high) if h == 0]  # a character below U+0100 has a NUL as its high byte
        if (half >= 2 and len(latin) >= 0.4 * half and low.count(0) <= 0.05 * half
                and sum(32 <= b < 127 or b >= 160 or b in (9, 10, 13) for b in latin) >= 0.9 * len(latin)):
            return name, "every other byte is NUL"
    return None


class NotLineText(SourceError):
    """A file read line by line (JSONL, CSV) whose encoding writes a newline in more than one byte: UTF-16, UTF-32
    (``line_reader_refuses``); ``why`` is the message without the file's path."""

    def __init__(self, path: str, why: str, **where: str | None):
        self.why = why
        super().__init__(f"{path}: {why}", **where)


def warn_of_file(op: Any, name: str, message: str) -> None:
    """Log ``message``, a warning about the file ``name`` that is one document, or hold it while the source ``op``
    holds its files' warnings (``Source.held_notes``): staging logs it when the file's document is staged, not when
    a re-ingest reads a file whose document is in the index already, only to compare it."""
    held = getattr(op, "held_notes", None)
    if held is None:
        log.warning("%s", message)
    else:
        held.setdefault(name, []).append(message)


def utf16_without_bom(content: bytes, name: str, op: Any = None) -> tuple[str, str] | None:
    """A whole file's text and encoding when it is UTF-16 without a byte-order mark (``wide_encoding``), with a
    warning naming the file as a guess has (``warn_of_file``); None for any other file (one with the mark is guessed
    as UTF-16)."""
    wide = wide_encoding(content)
    if wide is None or wide[0] not in ("UTF-16LE", "UTF-16BE"):
        return None
    try:
        text = content.decode(wide[0])
    except UnicodeDecodeError:
        return None
    warn_of_file(op, name, f"{name}: UTF-16 text without a byte-order mark (every other byte is NUL): read as "
                           f"{wide[0]}; if its text looks wrong, give the file's encoding (the encoding param, tessera "
                           "ingest --encoding)")
    return text, codecs.lookup(wide[0]).name


def line_reader_refuses(head: bytes) -> str | None:
    """Why a file read line by line (JSONL, CSV) that starts with ``head`` cannot be: UTF-16 and UTF-32 write a
    newline in more than one byte. None for any other file."""
    if (wide := wide_encoding(head)) is None:
        return None
    name, why = wide
    return (f"the file is {name} text ({why}), and JSONL and CSV are read line by line, in an encoding that writes "
            f"a newline as one byte: convert it to UTF-8 (iconv -f {name} -t UTF-8 FILE > NEW_FILE)")


class FileDecoder:
    """Decodes the bytes of one file (a line at a time, or all of it): UTF-8, else the encoding given, else the
    one guessed for the file (once; a warning names the file). ``head()`` gives the first bytes of a file read
    line by line (``lines``), for a guess. Bytes the encoding cannot read raise ``UnicodeDecodeError``, whose
    reason says what was tried."""

    def __init__(self, path: str, encoding: str | None, *, lines: bool, head=None, op: Any = None):
        self.path, self.encoding, self.lines, self.head, self.op = path, encoding, lines, head, op
        self.guessed: str | None = None
        #: The first byte that is not UTF-8 in UTF-8 text read all the same: (offset in what was decoded, value).
        self.stray: tuple[int, int] | None = None
        self._guessed = False
        self._warned_stray = False

    def __call__(self, raw: bytes) -> str:
        if self.encoding is not None:
            return raw.decode(self.encoding)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as err:
            if (text := _utf8_with_stray_bytes(raw)) is not None:
                self._stray(raw, err)
                return text
            encoding = self._guess(raw, err)
            if encoding is None:
                raise UnicodeDecodeError(err.encoding, err.object, err.start, err.end,
                                         f"{err.reason}, and no other encoding could be guessed") from None
            return raw.decode(encoding)

    def _warn(self, message: str) -> None:
        """A whole file's warning goes as ``warn_of_file`` says; a file read line by line is many documents, whose
        staging cannot tell it apart (logged now)."""
        if self.lines:
            log.warning("%s", message)
        else:
            warn_of_file(self.op, self.path, message)

    def _stray(self, raw: bytes, err: UnicodeDecodeError) -> None:
        """One warning per file (and source) that UTF-8 text of it holds bytes that are not UTF-8; the source keeps
        the first such byte (``read_as``)."""
        warned = self.op.__dict__.setdefault("_stray_bytes", {}) if self.op is not None else {}
        if self.path not in warned and not self._warned_stray:
            at = "" if self.lines else f" at byte {err.start + 1}"
            self._warn(f"{self.path}: UTF-8 text with a byte that is not UTF-8 (0x{raw[err.start]:02x}{at}): read as "
                       "UTF-8, each such byte as U+FFFD; if the file has another encoding, give it (the encoding "
                       "param, tessera ingest --encoding)")
        warned.setdefault(self.path, raw[err.start])
        self._warned_stray = True
        if self.stray is None:
            self.stray = (err.start, raw[err.start])

    def _guess(self, raw: bytes, err: UnicodeDecodeError) -> str | None:
        """The file's guessed encoding: guessed once per file and source (a file read in byte ranges too)."""
        known = self.op.__dict__.setdefault("_guessed_encodings", {}) if self.op is not None else {}
        if not self._guessed and self.path in known:
            self._guessed, self.guessed = True, known[self.path]
        if not self._guessed:
            self._guessed = True
            if self.lines:  # the file's first lines that are not UTF-8, then this one (or its bytes around the
                sample = raw[max(0, err.start - GUESS_BYTES // 2):err.start + GUESS_BYTES // 2]  # first bad one)
                sample = (_not_utf8_lines(self.head()[:GUESS_BYTES]) if self.head is not None else b"") + sample
            elif err.start < GUESS_BYTES:  # a whole file: its start, and the bytes around the first that is not
                sample = raw[:GUESS_BYTES]  # UTF-8, cut at a multiple of 4 bytes (UTF-16 and -32 stay aligned)
            else:
                at = err.start - err.start % 4
                sample = raw[:GUESS_BYTES // 2] + raw[at:at + GUESS_BYTES // 2]
            self.guessed = guess_encoding(sample, lines=self.lines)
            if self.guessed is not None:
                at = "" if self.lines else f" at byte {err.start + 1}"
                self._warn(f"{self.path}: not UTF-8 (byte 0x{raw[err.start]:02x}{at}): read as {self.guessed}, the "
                           "encoding charset-normalizer guesses; if its text looks wrong, give the file's encoding "
                           "(the encoding param, tessera ingest --encoding)")
            known[self.path] = self.guessed
        return self.guessed


def file_head(path: str) -> bytes:
    """The first bytes of a file (of its content, for a gzipped one), for a guess."""
    import gzip

    from operators.sources.paths import is_gzip

    with (gzip.open if is_gzip(path) else open)(path, "rb") as f:
        return f.read(GUESS_BYTES)


def read_as(op: Any, path: str) -> tuple[str | None, int | None]:
    """How the source ``op`` read the file ``path`` line by line, as its decoders kept it: the encoding guessed for
    it (None: UTF-8, or none could be guessed) and the first byte that is not UTF-8 in UTF-8 text, read as U+FFFD
    (None: none)."""
    return op.__dict__.get("_guessed_encodings", {}).get(path), op.__dict__.get("_stray_bytes", {}).get(path)


def line_decoder(path: str, encoding: str | None, op: Any = None) -> FileDecoder:
    """The decoder of a file read line by line (JSONL, CSV)."""
    return FileDecoder(path, encoding, lines=True, head=lambda: file_head(path), op=op)


def shown(encoding: str | None) -> str:
    """An encoding as a message names it: UTF-8 as it is usually written."""
    return "UTF-8" if encoding in (None, "utf-8") else encoding


def undecodable_line(err: UnicodeDecodeError, encoding: str | None = None) -> str:
    """``not UTF-8 text (byte 0xe9 at byte 6 of the line: invalid continuation byte)``: why a line is not text, as
    every reader of a line-by-line file says it (a source, the training corpus, a qrels file)."""
    return f"not {shown(encoding)} text (byte 0x{err.object[err.start]:02x} at byte {err.start + 1} of the line: " \
           f"{err.reason})"


def undecodable(err: UnicodeDecodeError, encoding: str | None) -> str:
    """Why a line of a source's file is not text, for its failure: the byte, and what to do."""
    return (f"{undecodable_line(err, encoding)}; give the file's encoding (the encoding param, tessera ingest "
            "--encoding)")


def save_as_utf8(data: bytes, what: str = "it") -> str:
    """What to do with a file that must be UTF-8 and is not (a queries file, a spec, the Serve config): save ``what``
    as UTF-8, with the ``iconv`` line from the encoding charset-normalizer guesses (Notepad's and Excel's Windows-1252
    on Windows; UTF-16 for Notepad's 'Unicode'). An advice of Latin-1 turned Windows' curly quotes into C1 control
    characters."""
    guess = guess_encoding(data[:GUESS_BYTES], lines=False)
    if guess is None:  # no text encoding reads it (binary bytes): no iconv line to give
        return f"save {what} as UTF-8 text"
    return (f"it reads as {guess}: save {what} as UTF-8 (iconv -f {codecs.lookup(guess).name.upper()} -t UTF-8 FILE "
            "> NEW_FILE)")


def not_utf8_at(err: UnicodeDecodeError) -> str:
    """``byte 0xe9 at byte 6, line 2``: where a file's first byte that is not UTF-8 is, to find it in an editor."""
    line = err.object[:err.start].count(b"\n") + 1
    return f"byte 0x{err.object[err.start]:02x} at byte {err.start + 1}, line {line}"
