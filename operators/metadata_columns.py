"""What a document's metadata field may be named, and hold, to become a doc-store column.

One rule for the service's documents (``serve.indices.documents``) and for a Markdown file's front matter, which both
``tessera ingest`` (``sources.files``) and the service's file upload read (``sources.file_text``), so the same
file gives the same columns either way, each a plain Arrow column that a metadata filter can name.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: The chunker's columns (``preprocess.chunk``): every passage of every document has them, so ingestion drops a
#: source's field of these names (``flows.ingestion.column_types.OWN_COLUMNS``), where the uploader never sees it.
CHUNK_COLUMNS = frozenset({"chunk_id", "chunk_index", "total_chunks"})
#: Columns the index or search writes itself: no metadata field may take these names.
RESERVED = frozenset({"_id", "id", "docno", "doc_id", "text", "title", "vector", "qid", "query", "score",
                      "rank"}) | CHUNK_COLUMNS
#: Besides ``RESERVED``, a document file's own columns (``path``, ``page``): a front matter field of one of these
#: names would be overwritten by them. (A JSON document's metadata may use them: nothing else writes them there.)
FILE_RESERVED = RESERVED | {"path", "page"}
#: A ranking step's copies of its scores and ranks (``score_bm25``, ``rank_dense``) are the data model's, typed
#: float and int32 (``operators.output_checks``): a metadata column so named, of another type, failed every search
#: of its index (a 500), and one of that type was replaced by the step's score. No metadata name starts with these.
RANKING_PREFIXES = ("score_", "rank_")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def is_metadata_name(name: str, reserved: frozenset[str] = RESERVED) -> bool:
    """Whether ``name`` may name a metadata column: a letter, then letters, digits or _ (64 at most), and none
    of ``reserved``, nor a ranking step's score or rank (``RANKING_PREFIXES``)."""
    return bool(_NAME.fullmatch(name)) and name not in reserved and not name.startswith(RANKING_PREFIXES)


def name_rule(reserved: frozenset[str] = RESERVED) -> str:
    """The rule of ``is_metadata_name``, for a message."""
    return (f"a metadata column's name is ASCII letters, digits and _ (64 at most), starting with a letter, and none "
            f"of {', '.join(sorted(reserved))}, nor starting with {' or '.join(RANKING_PREFIXES)} (a search's scores "
            "and ranks)")


def metadata_fields(fields: dict[str, Any],
                    reserved: frozenset[str] = FILE_RESERVED) -> tuple[dict[str, Any], list[str]]:
    """The fields that become metadata columns, and the names of those left out (a name no metadata column may
    have). A text, number or true/false stays as it is; a list, a mapping or any other value becomes its JSON
    text (as a JSONL source keeps a nested field); a null is no field."""
    kept: dict[str, Any] = {}
    left_out: list[str] = []
    for name, value in fields.items():
        if value is None:
            continue
        if not is_metadata_name(name, reserved):
            left_out.append(name)
        elif isinstance(value, (str, bool, int, float)):
            kept[name] = value
        else:
            kept[name] = json.dumps(value, ensure_ascii=False, default=str)
    return kept, left_out
