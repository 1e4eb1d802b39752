"""GRPO training-data source: the documents quoted in chat prompts."""

from __future__ import annotations

import logging
import re
from typing import Any, Iterator, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Source
from operators.conversation import content_text
from operators.ids import content_doc_id
from operators.local_files import local_path
from operators.sources._common import FileRange, iter_jsonl, rebatch
from operators.sources.paths import resolve_paths

logger = logging.getLogger("operators.sources")

_BLOCK = re.compile(r"<documents>(.*?)</documents>", re.DOTALL | re.IGNORECASE)
_MARKER = re.compile(r"\[(\d+)\]")
_LABELLED = re.compile(r"^Title:\s*(.*?)\s*(?:Content|Text):\s*(.*)$", re.DOTALL | re.IGNORECASE)


def parse_documents(block: str) -> list[tuple[str, str]]:
    """``(title, text)`` of each ``[n] Title: Content`` entry of a ``<documents>`` block.

    Only markers numbered 1, 2, 3... in order start an entry, so a citation like
    ``[12]`` inside a text stays in it. The title ends at the first ``": "``; an
    entry without one has an empty title. ``Title: ... Content: ...`` is read too.
    """
    starts: list[re.Match] = []
    for match in _MARKER.finditer(block):
        if int(match.group(1)) == len(starts) + 1:
            starts.append(match)
    entries = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(block)
        entry = block[match.end():end].strip()
        labelled = _LABELLED.match(entry)
        if labelled:
            title, text = labelled.group(1), labelled.group(2)
        else:
            title, sep, text = entry.partition(": ")
            if not sep:
                title, text = "", entry
        if text.strip() or title.strip():
            entries.append((title.strip(), text.strip()))
    return entries


class GrpoDocumentsSource(Source):
    """Extract the unique documents quoted in GRPO training prompts (chat ``messages`` or ``prompt``).

    In each row's user messages (or its ``prompt``, a string or a message list), the
    documents appear as ``<documents>[1] Title: Content [2] Title: Content ...</documents>``.
    Every distinct (title, text) is emitted once, in order of first appearance, as
    ``docno`` (content id: md5 of title + first 100 characters of text, 12 hex),
    ``title``, ``text``, ``source_row`` (0-based row, over the files in order, where
    it first appears) and ``occurrences`` (how many times the prompts quote it).
    The whole input is read as one split, since deduplication spans all rows.

    Usage::

        GrpoDocumentsSource({"path": "grpo_train.jsonl"})(pa.table({}))
        # docno, title, text, source_row, occurrences
    """

    name = "sources.grpo"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str = Field(..., min_length=1, json_schema_extra=local_path(),
                          description="GRPO rows: a JSONL or Parquet file, a glob, or a folder.")
        messages_field: str = Field("messages", min_length=1, description="Field holding the chat messages.")
        prompt_field: str = Field(
            "prompt", min_length=1, description="Field used when a row has no messages: a string or a message list."
        )
        roles: list[str] = Field(["user"], min_length=1, description="Roles of the messages searched for documents.")
        on_error: Literal["raise", "skip"] = Field(
            "raise", description="A bad JSONL line: `raise` an error naming file and line, or `skip` it and log it."
        )
        limit: int | None = Field(None, gt=0, description="Emit only the first N distinct documents.")
        batch_rows: int = Field(10_000, gt=0, description="Most rows in one emitted table.")

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "title": "text", "text": "text", "source_row": "data", "occurrences": "data"}

    def _paths(self):
        return resolve_paths(self.params.path, op=self, suffixes=(".jsonl", ".jsonl.gz", ".parquet"))

    def splits(self) -> list[None]:
        self._paths()  # fail early, naming the path
        return [None]

    def _rows(self) -> Iterator[dict]:
        import pyarrow.parquet as pq

        for path in self._paths():
            if path.name.endswith((".parquet", ".pq")):
                for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
                    yield from batch.to_pylist()
            else:
                yield from iter_jsonl(FileRange(str(path)), on_error=self.params.on_error, op=self)

    def _texts(self, row: dict) -> list[str]:
        p = self.params
        messages = row.get(p.messages_field)
        if messages is None:
            messages = row.get(p.prompt_field)
        if isinstance(messages, str):
            return [messages]
        if not isinstance(messages, list):
            return []
        return [
            content_text(m.get("content"), "\n")
            for m in messages
            if isinstance(m, dict) and m.get("role") in p.roles
        ]

    def read(self, split: Any) -> Iterator[pa.Table]:
        index: dict[tuple[str, str], int] = {}
        ids: dict[str, tuple[str, str]] = {}
        docnos: list[str] = []
        titles: list[str] = []
        texts: list[str] = []
        first_rows: list[int] = []
        counts: list[int] = []
        rows = without = 0
        for row_number, row in enumerate(self._rows()):
            rows += 1
            found = False
            for content in self._texts(row):
                for block in _BLOCK.findall(content):
                    for key in parse_documents(block):
                        found = True
                        at = index.get(key)
                        if at is not None:
                            counts[at] += 1
                            continue
                        index[key] = len(docnos)
                        docnos.append(self._unique_id(content_doc_id(*key), key, ids))
                        titles.append(key[0])
                        texts.append(key[1])
                        first_rows.append(row_number)
                        counts.append(1)
            without += not found
        if without:
            logger.info("%s [%s]: %d of %d rows quote no <documents>", self.name, self.step_id, without, rows)
        table = pa.table({
            "docno": pa.array(docnos, pa.string()),
            "title": pa.array(titles, pa.string()),
            "text": pa.array(texts, pa.string()),
            "source_row": pa.array(first_rows, pa.int64()),
            "occurrences": pa.array(counts, pa.int32()),
        })
        if table.num_rows == 0:
            yield table  # keep the schema: downstream steps still see the columns
            return
        yield from rebatch([table], self.params.batch_rows, self.params.limit)

    def _unique_id(self, docno: str, key: tuple[str, str], ids: dict[str, tuple[str, str]]) -> str:
        """The content id, suffixed ``-2``, ``-3``... when a different document already has it."""
        candidate, n = docno, 1
        while candidate in ids and ids[candidate] != key:
            n += 1
            candidate = f"{docno}-{n}"
        if n > 1:
            logger.warning("%s [%s]: documents share content id %s (same title and opening); "
                           "the later one is %s", self.name, self.step_id, docno, candidate)
        ids[candidate] = key
        return candidate
