"""Record sources (CSV, TSV, JSONL, Parquet) read a text's and a title's line ends as universal newlines do."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from operators.registry import create


def _write(folder, end: str) -> None:
    folder.mkdir()
    (folder / "sheet.csv").write_bytes(end.join([
        "title,text,note", f'"Kiwi{end}bird","Kiwi lay eggs.{end}They are nocturnal.","a{end}b"',
        "Kea,Kea are parrots.,c", ""]).encode())
    (folder / "sheet.tsv").write_bytes(end.join(["title\ttext", f'Weta\t"Weta are{end}insects."', ""]).encode())
    records = [{"title": f"Tui{end}bird", "text": f"Tui sing.{end}{end}They mimic.", "note": f"x{end}y"}]
    (folder / "notes.jsonl").write_bytes(end.join(json.dumps(r) for r in records).encode() + end.encode())
    pq.write_table(pa.Table.from_pylist(records), folder / "notes.parquet")


def _read(op: str, path) -> list[dict]:
    params = {"path": str(path), **({"delimiter": "\t"} if path.suffix == ".tsv" else {})}
    return create(op, params)(pa.table({})).to_pylist()


def test_a_record_file_saved_on_windows_is_the_same_documents_as_one_saved_on_linux(tmp_path):
    """A CSV cell of several lines saved with CRLF (Excel on Windows, a clone with autocrlf) and a JSON export of a
    web form's CRLF text gave texts holding ``\\r`` and content ids other than the LF copy's: one document twice in an
    index, and ``\\r`` in a snippet. The text and title now read as LF; other fields keep their characters."""
    for folder, end in (("lf", "\n"), ("crlf", "\r\n"), ("cr", "\r")):
        _write(tmp_path / folder, end)
    for op, name in (("sources.csv", "sheet.csv"), ("sources.csv", "sheet.tsv"), ("sources.jsonl", "notes.jsonl"),
                     ("sources.parquet", "notes.parquet")):
        if name.endswith(".csv") or name.endswith(".tsv"):
            ends = ("crlf",)  # a CSV of lines ending in CR alone is refused, as before (tr '\r' '\n')
        else:
            ends = ("crlf", "cr")
        lf = _read(op, tmp_path / "lf" / name)
        for end in ends:
            rows = _read(op, tmp_path / end / name)
            assert [(r["docno"], r["title"], r["text"]) for r in rows] == \
                   [(r["docno"], r["title"], r["text"]) for r in lf], (op, name, end)
            assert not any("\r" in r["text"] + r["title"] for r in rows)
    [kiwi, _] = _read("sources.csv", tmp_path / "crlf" / "sheet.csv")
    assert kiwi["title"] == "Kiwi\nbird" and kiwi["text"] == "Kiwi lay eggs.\nThey are nocturnal."
    assert kiwi["note"] == "a\r\nb"  # a metadata field: the value as written
    [tui] = _read("sources.jsonl", tmp_path / "crlf" / "notes.jsonl")
    assert tui["text"] == "Tui sing.\n\nThey mimic." and tui["note"] == "x\r\ny"
