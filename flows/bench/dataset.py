"""A BEIR-layout dataset as the benchmarker sees it: corpus path, judged queries, qrels.

``<dir>/corpus.jsonl``, ``<dir>/queries.jsonl``, ``<dir>/qrels/<split>.tsv``, and the
gold answers of ``<dir>/questions.jsonl`` where the set has one (``flows.bench.answers``). The
queries evaluated are those of ``queries.jsonl`` (in file order) that have at least
one judgement in the split; ``limit`` keeps the first N of them. Qrels are cut to the
evaluated queries. ``fingerprint()`` hashes the content (order-independent), so a
run is keyed by what was asked and judged, not by file names or line order.

Ids are compared as strings, as trec_eval does, so ids written differently in two files
(``7`` against ``007``, a prefix) match nothing and would score 0 without a word: judged
queries missing from ``queries.jsonl`` and relevant documents missing from ``corpus.jsonl``
are counted and named (``warnings()``), and a dataset where no query or no relevant
document matches is refused, with examples of the ids on both sides.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from flows.bench.errors import BenchError


@dataclass(frozen=True)
class Dataset:
    root: Path
    split: str
    corpus: Path
    queries: pa.Table  # qid, query: the evaluated queries, in file order
    qrels: pa.Table  # qid, docno, relevance: judgements of the evaluated queries
    unjudged: int  # queries in queries.jsonl without judgements in this split (not evaluated)
    missing: int  # judged qids absent from queries.jsonl (cannot be evaluated)
    answers: dict[str, list[str]] = field(default_factory=dict)  # qid -> gold answer and aliases (questions.jsonl)
    missing_examples: tuple[str, ...] = ()  # a few of the ``missing`` qids
    relevant: int = 0  # judgements of the evaluated queries with a grade above 0
    unknown_docs: tuple[str, ...] = ()  # the document of each of those judgements that corpus.jsonl lacks
    repeated_docs: tuple[str, ...] = ()  # each corpus id given again after its first line (the index keeps the first)
    documents: int = 0  # the ids corpus.jsonl holds, each once
    no_id: tuple[int, int, tuple[str, ...]] = (0, 0, ())  # documents without an id: how many, the first's line, fields

    def warnings(self) -> list[str]:
        """What makes judged queries count less than a reader would think: ids that match nothing."""
        qrels = f"{self.root / 'qrels' / self.split}.tsv"
        found = []
        if self.missing:
            found.append(f"{self.missing} judged queries of {qrels} are not in {self.root / 'queries.jsonl'} and are "
                         f"not evaluated (such as {shown_ids(self.missing_examples)}): {SAME_IDS}")
        if self.no_id[0]:
            count, line, fields = self.no_id
            found.append(f"{count} document(s) of {self.corpus} have no id (such as line {line}, whose fields are "
                         f"{', '.join(map(repr, fields))}): {_ID_NAMES}; the index gives each a made-up id, which no "
                         "judgement names, so they are searched but never found relevant")
        if self.unknown_docs:
            shown = shown_ids(dict.fromkeys(self.unknown_docs))
            found.append(f"{len(self.unknown_docs)} of the {self.relevant} relevant judgements of {qrels} name a "
                         f"document that is not in {self.corpus} (such as {shown}): no flow can find it, so it "
                         f"counts as missed; {SAME_IDS}")
        if self.repeated_docs:
            found.append(f"{self.corpus} repeats {len(self.repeated_docs)} document id(s) (such as "
                         f"{shown_ids(dict.fromkeys(self.repeated_docs))}): the index holds the first copy of each, as "
                         "ingestion does, and a later copy is never searched; give each document its own id")
        return found

    def unjudged_note(self) -> str:
        """`` (N of queries.jsonl without a judgement in SPLIT.tsv are not run)``, or nothing: said after the count of
        queries benchmarked on the console, in report.md and (``unjudged``) in bench.json."""
        return (f" ({self.unjudged} of queries.jsonl without a judgement in {self.split}.tsv are not run)"
                if self.unjudged else "")

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def qids(self) -> list[str]:
        return self.queries.column("qid").to_pylist()

    def queries_fingerprint(self) -> str:
        return _rows_sha256(self.queries, ["qid", "query"])

    def qrels_fingerprint(self) -> str:
        return _rows_sha256(self.qrels, ["qid", "docno", "relevance"])

    def corpus_sha256(self) -> str:
        from operators.atomic import file_sha256

        return file_sha256(self.corpus)


#: What ids that match nothing usually are, and the fix.
SAME_IDS = "check that the files use the same ids (the same string: not 7 for '007', no prefix)"


#: Why an id with whitespace is refused before anything runs, rather than after every flow has.
_NOT_IN_TREC = ("has whitespace, which the run's TREC file (OUT/runs/*.trec, for trec_eval) cannot hold: give the "
                "ids without spaces, in every file")


def _spaced(value: str) -> bool:
    return any(ch.isspace() for ch in value)


def shown_ids(ids, most: int = 3) -> str:
    return ", ".join(repr(i) for i in list(ids)[:most])


def _rows_sha256(table: pa.Table, columns: list[str]) -> str:
    rows = sorted(zip(*(map(str, table.column(c).to_pylist()) for c in columns)))
    digest = hashlib.sha256()
    for row in rows:
        digest.update(("\t".join(row) + "\n").encode("utf-8"))
    return digest.hexdigest()


def load_dataset(folder: str | Path, *, split: str = "test", limit: int | None = None,
                 benchmarked: bool = True) -> Dataset:
    """Read a BEIR folder; every missing piece is a ``BenchError`` naming the path. ``benchmarked``: refuse a
    dataset where no relevant judgement names a document of the corpus (every query would score 0), and ids with
    whitespace (no TREC run holds them); training reads the set as it is (its pseudo-queries need no judgement)."""
    from flows.queries import read_queries
    from operators.errors import TesseraError
    from operators.sources._beir_files import load_qrels, qrels_splits

    root = Path(folder).expanduser()
    if root.is_file():
        raise BenchError(f"dataset '{folder}' is a file; give the BEIR folder that holds corpus.jsonl, "
                         "queries.jsonl and qrels/", field="dataset")
    if not root.is_dir():
        where = "" if root.is_absolute() else f" (a relative path, read from {Path.cwd()})"
        raise BenchError(f"dataset folder '{folder}' does not exist{where}{_close_folder(root)}", field="dataset")
    corpus, queries_path = root / "corpus.jsonl", root / "queries.jsonl"
    for path in (corpus, queries_path):
        if not path.is_file():
            raise BenchError(f"dataset folder '{root}' has no {path.name} (BEIR layout: corpus.jsonl, "
                             f"queries.jsonl, qrels/<split>.tsv){_held_instead(root, path.stem)}", field="dataset")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise BenchError(f"no qrels file '{qrels_path}'{_other_splits(qrels_splits(root))}"
                         f"{_qrels_elsewhere(root, split)}", field="split")
    try:
        qrels = load_qrels(root, split)
        queries = read_queries(queries_path)
    except TesseraError as err:
        raise BenchError(err.message, field="dataset") from None
    if qrels.num_rows == 0:
        raise BenchError(f"{qrels_path} holds no judgement (one 'query-id<TAB>corpus-id<TAB>score' line each, or "
                         "TREC's 'qid 0 docno grade')", field="dataset")
    judged = list(dict.fromkeys(qrels.column("qid").to_pylist()))
    known = queries.column("qid").to_pylist()
    keep = pc.is_in(queries.column("qid"), value_set=pa.array(judged, pa.string()))
    evaluated = queries.filter(keep)
    if limit is not None:
        evaluated = evaluated.slice(0, limit)
    if evaluated.num_rows == 0:
        raise BenchError(f"no query of {queries_path} has judgements in {qrels_path} (its ids: {shown_ids(known)}; the "
                         f"judged ones: {shown_ids(judged)}): {SAME_IDS}", field="dataset")
    spaced = next((q for q in evaluated.column("qid").to_pylist() if _spaced(q)), None)
    if benchmarked and spaced is not None:
        raise BenchError(f"{queries_path}: query id {spaced!r} {_NOT_IN_TREC}", field="dataset")
    qrels = qrels.filter(pc.is_in(qrels.column("qid"), value_set=evaluated.column("qid")))
    relevant = qrels.filter(pc.greater(qrels.column("relevance"), 0)).column("docno").to_pylist()
    if benchmarked and not relevant:  # every judgement 0: every measure 0, nDCG too, said as a partial warning before
        raise BenchError(f"no judgement of {qrels_path} for the queries benchmarked is relevant (above 0): every "
                         "query would score 0; a split of judgements above 0 is needed", field="dataset")
    wanted = set(relevant)
    _refuse_wide_text(corpus)
    found, some_ids, repeated, documents, no_id = _corpus_ids(corpus, wanted, spaced_ok=not benchmarked)
    unknown = tuple(d for d in relevant if d not in found)
    if benchmarked and relevant and not some_ids:  # "its ids: ;" before
        what, why = ((f"no document with an id ({_ID_NAMES}; line {no_id[1]}'s fields: "
                      f"{', '.join(map(repr, no_id[2]))})", "") if no_id[0]
                     else ("no document (a JSON object a line, with its _id)", _not_json_lines(corpus)))
        raise BenchError(f"{corpus} holds {what}: every query would score 0{why}", field="dataset")
    if benchmarked and relevant and len(unknown) == len(relevant):
        raise BenchError(f"no relevant judgement of {qrels_path} names a document of {corpus} (its ids: "
                         f"{shown_ids(some_ids)}; the judged ones: {shown_ids(dict.fromkeys(unknown))}): every query "
                         f"would score 0; {SAME_IDS}", field="dataset")
    asked = set(known)
    missing = [q for q in judged if q not in asked]
    from flows.bench.answers import load_gold

    return Dataset(root=root, split=split, corpus=corpus, queries=evaluated, qrels=qrels,
                   unjudged=len(known) - int(pc.sum(keep).as_py() or 0), missing=len(missing),
                   answers=load_gold(root / "questions.jsonl", evaluated.column("qid").to_pylist()),
                   missing_examples=tuple(missing[:3]), relevant=len(relevant),
                   unknown_docs=unknown, repeated_docs=repeated, documents=documents, no_id=no_id)


def _other_splits(splits: list[str]) -> str:
    """What to give instead of a split the dataset lacks: a folder of ``qrels/dev.tsv`` alone said '(splits there:
    dev)', leaving the option that picks it unnamed."""
    if not splits:
        return " (no qrels/SPLIT.tsv file there: BEIR layout)"
    if len(splits) == 1:
        return f" (the only split there is '{splits[0]}': give --split {splits[0]})"
    return f" (splits there: {', '.join(splits)}: give --split with one of them)"


def _close_folder(folder: Path) -> str:
    """A typo's likely meaning, in the path as it was given: the first part of ``folder`` that is not there,
    replaced by a folder beside it of a close name (``scifcat`` for ``scifact``)."""
    from operators.error_text import close_names, did_you_mean

    parts = folder.parts
    for i in range(len(parts)):
        if not Path(*parts[:i + 1]).exists():
            break
    parent = Path(*parts[:i]) if i else Path(".")
    try:
        names = [p.name for p in parent.iterdir() if p.is_dir()]
    except OSError:
        return ""
    close = [str(Path(*parts[:i], name, *parts[i + 1:])) for name in close_names(parts[i], names, words=False)]
    return f"; {did_you_mean(close)}" if close else ""


def _held_instead(root: Path, stem: str) -> str:
    """What the folder holds in place of ``STEM.jsonl`` (a ``corpus.csv``, a ``queries.tsv``) and how to write the
    JSON lines file from it (a CSV by the standard library, its ids kept as text, a byte order mark dropped: Excel's
    "CSV UTF-8" gave every line a field '\\ufeff_id' and no id); else what the folder holds."""
    if stem == "queries" and (topics := _topics_instead(root)):
        return topics
    names = sorted(p.name for p in root.iterdir())
    other = next((n for n in names if n.lower().startswith(stem + ".") and n.lower() != f"{stem}.jsonl"), None)
    if other is None:
        more = f" and {len(names) - 8} more" if len(names) > 8 else ""
        return f"; the folder holds {', '.join(names[:8]) or 'nothing'}{more}"
    fields = "_id, title, text" if stem == "corpus" else "_id, text"
    source, target = str(root / other), str(root / f"{stem}.jsonl")
    rows = {".csv": ("csv", f"csv.DictReader(open({source!r}, newline='', encoding='utf-8-sig'))"),
            ".parquet": ("pyarrow.parquet", f"pyarrow.parquet.read_table({source!r}).to_pylist()")}
    how = ""
    if (read := rows.get(Path(other).suffix.lower())) is not None:  # a CSV's first line names its fields
        code = (f"import json, {read[0]}; open({target!r}, 'w', encoding='utf-8').writelines(json.dumps(r, "
                f"ensure_ascii=False, default=str) + '\\n' for r in {read[1]})")
        how = f" (from {other}, its columns named so: {shlex.join(['python', '-c', code])})"  # any folder's name
    return (f"; it has {other}, which is not read: write {stem}.jsonl beside it, one JSON object a "
            f"line with {fields}{how}")


def _topics_instead(root: Path) -> str:
    """A TREC topic file or a ``qid<TAB>query`` file beside the corpus (``topics.301-450``, ``topics.trec``,
    ``queries.tsv``), named with the line that writes queries.jsonl from it: ``read_queries`` reads both, as
    ``tessera run --queries`` does, and a researcher's queries come as such files more often than as JSON lines."""
    from flows.queries import read_queries
    from operators.errors import TesseraError

    for path in sorted(root.iterdir()):
        name = path.name.lower()
        if not ("topic" in name or name.startswith("queries.")) or name.endswith((".jsonl", ".gz")) or path.is_dir():
            continue
        try:
            count = read_queries(path).num_rows
        except (TesseraError, OSError):
            continue
        target, source = json.dumps(str(root / "queries.jsonl")), json.dumps(str(path))  # "...": shlex quotes once
        code = (f'import json; from flows.queries import read_queries; open({target}, "w", encoding="utf-8")'
                '.writelines(json.dumps({"_id": r["qid"], "text": r["query"]}, ensure_ascii=False) + "\\n" '
                f'for r in read_queries({source}).to_pylist())')
        return (f"; it has {path.name}, {count} queries (qid and title, as tessera run --queries reads it), which "
                f"the benchmark does not read: write queries.jsonl from it: {shlex.join(['python', '-c', code])}")
    return ""


def _qrels_elsewhere(root: Path, split: str) -> str:
    """A qrels file the benchmark does not read under another name or place (``qrels/test.csv``, ``qrels.tsv``,
    ``test.tsv`` or a TREC ``qrels.trec``, ``test.qrels`` beside corpus.jsonl), named with the name to give it."""
    wanted = root / "qrels" / f"{split}.tsv"
    qrels = root / "qrels"
    near = [p for p in qrels.glob(f"{split}.*") if p.suffix != ".tsv"] if qrels.is_dir() else []
    near += [p for p in (root / "qrels.tsv", root / f"{split}.tsv", root / "qrels.txt") if p.is_file()]
    near += [p for p in sorted(root.iterdir()) if "qrel" in p.name.lower() and p.is_file() and p not in near]
    if not near:
        return ""
    return (f"; {near[0]} is not read: qrels are read from qrels/<split>.tsv, so move it to {wanted} "
            "(columns separated by tabs or spaces)")


def _refuse_wide_text(corpus: Path) -> None:
    """A UTF-16 corpus (a Windows export), which ingestion refuses too: read as UTF-8, its every line was taken for a
    line that is no JSON object, and the refusal quoted its NUL bytes."""
    from operators.sources.encoding import GUESS_BYTES, line_reader_refuses

    with open(corpus, "rb") as f:
        if (why := line_reader_refuses(f.read(GUESS_BYTES))) is not None:
            raise BenchError(f"{corpus}: {why}", field="dataset")


def _not_json_lines(corpus: Path) -> str:
    """Why a corpus of lines gave no document: its first line that is not blank, which is no JSON object (a JSON
    array's ``[``, a pretty-printed file's)."""
    with open(corpus, encoding="utf-8-sig", errors="replace") as f:
        line = next(((n, text.strip()) for n, text in enumerate(f, 1) if text.strip()), None)
    if line is None:
        return ""
    if line[1].startswith("["):
        return (f"; it is one JSON array (line {line[0]}: {line[1][:40]!r}), not JSON lines: write each document's "
                "object on a line of its own")
    return f"; line {line[0]} is not a JSON object: {line[1][:60]!r}"


#: Where a document's id is read from, as ingestion reads it (``operators.sources._documents.default_id``).
_ID_NAMES = "a document's id is its '_id', else its 'docno', 'id' or 'doc_id'"


def _corpus_ids(corpus: Path, wanted: set[str], *, spaced_ok: bool
                ) -> tuple[set[str], list[str], tuple[str, ...], int, tuple[int, int, tuple[str, ...]]]:
    """The ``wanted`` ids that ``corpus`` holds (read as ingestion reads them), its first few ids, each id that
    repeats an earlier line's (ingestion keeps the first copy, silently for a benchmark: its ledger is not read),
    how many ids it holds, and how many objects have no id (ingestion makes one up from the content, which no
    judgement names: a ``docid`` field, say), with the first one's line and fields; a line that is not a JSON object
    is left to ingestion, which records it as a failure. An id with whitespace is refused unless ``spaced_ok``."""
    import json

    from operators.sources._common import default_id

    found: set[str] = set()
    first: list[str] = []
    seen: set[str] = set()
    repeated: list[str] = []
    no_id: list = [0, 0, ()]
    with open(corpus, encoding="utf-8-sig", errors="replace") as f:
        for number, line in enumerate(f, 1):
            try:
                doc = json.loads(line) if line.strip() else None
            except ValueError:
                continue
            key = default_id(doc) if isinstance(doc, dict) else None
            if key is None:
                if isinstance(doc, dict):
                    no_id = [no_id[0] + 1, no_id[1] or number, no_id[2] or tuple(doc)]
                continue
            if not spaced_ok and _spaced(key):
                raise BenchError(f"{corpus} line {number}: document id {key!r} {_NOT_IN_TREC}", field="dataset")
            if len(first) < 3:
                first.append(key)
            if key in seen:
                repeated.append(key)
            seen.add(key)
            if key in wanted:
                found.add(key)
    return found, first, tuple(repeated), len(seen), tuple(no_id)
