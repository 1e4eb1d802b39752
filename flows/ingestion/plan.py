"""An ingestion's plan: the read step, chunking and embedding, from the ingest spec and the caller's overrides."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from flows.ingestion.errors import IngestError
from operators.base import Source
from operators.errors import SourceError, plain_message, short_repr
from operators.path_access import windows_path
from operators.sources.encoding import check_encoding

log = logging.getLogger("tessera.ingest")

DEFAULT_SPEC = "ingest"
#: The steps an ingest spec names with a fixed meaning; any other step enriches documents before chunking.
FIXED_STEPS = ("read", "chunk", "embed")
#: Retries read sources from the ledger; a placeholder read step keeps the plan whole.
ANY_SOURCE = {"op": "sources.jsonl", "params": {"path": "-"}}


@dataclass
class IngestPlan:
    """A resolved ingestion: the read op, enrich steps, chunk and embed params, the embed step's resources."""

    read: Source
    chunk: dict[str, Any] | None
    embed: dict[str, Any]
    embed_options: dict[str, Any]
    settings_base: dict[str, Any]
    #: Row steps run on each document before chunking (``{"step", "op", "params"}``), in spec order: their
    #: columns (e.g. analyze.dimensions' year, country) go into the doc store with every chunk.
    enrich: list[dict[str, Any]] = field(default_factory=list)
    #: The embed step's ``placement`` (``{"deployment", "app"}``): its model runs on that Serve deployment.
    embed_placement: dict[str, Any] | None = None
    #: The chunk step's ``concurrency``: on Ray, the actors that read and chunk shards (None: one per 4 CPUs).
    chunk_concurrency: int | None = None


def load_spec(spec: str | Path | dict | None) -> tuple[Any, dict[str, Any] | None]:
    """An ingest flow spec (path, built-in name, YAML text or dict) and its index settings section."""
    from flows.spec import FlowSpec

    if spec is None:
        return None, None
    flow = FlowSpec.parse(dict(spec)) if isinstance(spec, dict) else FlowSpec.load(spec)
    built = flow.build()  # operators and params are checked before anything runs
    for step_id in flow.steps:
        if step_id not in FIXED_STEPS and built.operators[step_id].scope != "row":
            raise IngestError(f"an ingest spec has the steps read, chunk (optional), embed and row steps that "
                              f"enrich each document (analyze.*); '{flow.steps[step_id].op}' is a "
                              f"{built.operators[step_id].scope} step", step=step_id, field=f"steps.{step_id}.op")
    return flow, flow.index_settings


#: What ``source`` (``--source``) reads, by suffix: a format's name, its suffixes, its source operator and its params.
FORMATS = (
    ("JSONL", (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz"), "sources.jsonl", {}),
    ("Parquet", (".parquet", ".pq"), "sources.parquet", {}),
    ("CSV", (".csv", ".csv.gz"), "sources.csv", {}),
    ("TSV", (".tsv", ".tsv.gz"), "sources.csv", {"delimiter": "\t"}),
    ("PDF", (".pdf",), "sources.pdf", {}),
    ("text", (".txt",), "sources.files", {}),
    ("Markdown", (".md", ".markdown"), "sources.files", {}),
    ("HTML", (".html", ".htm"), "sources.files", {}),
)
#: Formats whose files are documents: a folder may mix them (``sources.files`` reads each by its kind).
DOCUMENT_FORMATS = ("PDF", "text", "Markdown", "HTML")
_KNOWN = ", ".join(f"{name} ({', '.join(suffixes)})" for name, suffixes, _, _ in FORMATS)
#: The corpus files that make a folder a BEIR folder, and the files of one that are not the user's documents.
_BEIR_CORPUS = ("corpus.jsonl", "corpus.jsonl.gz")
_BEIR_OWN = (*_BEIR_CORPUS, "queries.jsonl", "queries.jsonl.gz")
#: Globs of any file name, read by ``sources.files`` (each file by its kind, the others named in a warning).
_ANY_NAME = ("*", "*.*")


def _format(name: str) -> tuple[str, str, dict[str, Any], str] | None:
    """The format of a file or glob named ``name``, by its suffix: its name, source operator, params, suffix."""
    name = name.lower()
    return next(((label, op, params, suffix) for label, suffixes, op, params in FORMATS for suffix in suffixes
                 if name.endswith(suffix)), None)


def _refuse(source: str | Path, why: str) -> IngestError:
    return IngestError(
        f"cannot read source='{source}': {why}. Tessera reads {_KNOWN} files, a glob or a folder of one of "
        "them (PDF, text, Markdown and HTML files may be mixed), and a BEIR folder (corpus.jsonl); for another "
        "name, put the reader in a spec's read step (read: {op: sources.jsonl, params: {path: FILE}}) and pass "
        "it as spec= with no source=", field="source")  # Python's names: the CLI says --source (cli_option_error)


def _infer_read(source: str | Path, quiet: bool = False) -> tuple[str, dict[str, Any]]:
    """The source operator and params for a ``--source`` path: by suffix for a file or a glob, by the files it
    holds for a folder (its own files: sources read no subfolders); a path that is not there, or any other name,
    is refused. A folder's files that are not read are named in a warning, unless ``quiet``."""
    from operators.sources.paths import denied, is_glob

    path = Path(source).expanduser()
    if "://" not in str(source) and (why := denied(str(source))) is not None:  # an internal PermissionError before
        raise IngestError(f"cannot read source='{source}': {why}", field="source")
    if path.is_dir():
        return _folder_read(source, path, quiet)
    magic = is_glob(str(source))
    if not magic and "://" not in str(source) and not path.exists():
        windows = windows_path(str(source))
        raise IngestError(f"cannot read source='{source}': " + (f"no such file or folder, {windows}" if windows else
                          f"no such file or folder (working directory {os.getcwd()})"), field="source")
    known = _format(path.name)
    if known is None and magic and path.name in _ANY_NAME:
        return "sources.files", {"path": str(source)}
    if known is None:
        raise _refuse(source, "its type is not known from its suffix")
    _, op_name, params, _ = known
    return op_name, {"path": str(source), **params}


def _folder_read(source: str | Path, path: Path, quiet: bool) -> tuple[str, dict[str, Any]]:
    """A folder's reader: its one record format (JSONL, Parquet, CSV or TSV), else its document files (PDFs
    alone: ``sources.pdf``; mixed with text, Markdown or HTML: ``sources.files``); one of more document files than
    record files is refused, naming a glob of each. Its other files are named in one warning (``sources.files``
    names them itself)."""
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    if any((path / name).is_file() for name in _BEIR_CORPUS):  # not corpus.jsonl.bak, corpus.jsonl~ alone
        others = [p.name for p in files if p.name not in _BEIR_OWN and _format(p.name) is not None]
        if others and not quiet:  # a user's notes beside a corpus were left out without a word
            shown = ", ".join(others[:10]) + (", ..." if len(others) > 10 else "")
            log.warning("%s: a BEIR folder, of which only corpus.jsonl is read: %d other file(s) not read: %s "
                        "(ingest them as a source of their own, a glob of them)", source, len(others), shown)
        return "sources.beir", {"folder": str(source), "part": "corpus"}
    kinds = {p.name: _format(p.name) for p in files}
    found = {f[0]: f for f in kinds.values() if f is not None}
    records = {label: f for label, f in found.items() if label not in DOCUMENT_FORMATS}
    documents = sum(f is not None and f[0] in DOCUMENT_FORMATS for f in kinds.values())
    # the documents too where they are the folder's files, not a README beside a corpus (its 20 notes were left
    # out for the 3 rows of a CSV export beside them, with a warning)
    also = (f", or '{Path(source) / '*'}' for its {documents} PDF, text, Markdown and HTML files"
            if documents else "")
    if len(records) > 1:
        first = records[min(records)]
        raise _refuse(source, f"the folder holds {' and '.join(sorted(records))} files; give a glob of one kind "
                      f"('{Path(source) / ('*' + first[3])}'{also})")
    if records and documents > sum(f is not None and f[0] in records for f in kinds.values()):
        [(label, _, _, suffix)] = records.values()
        raise _refuse(source, f"the folder holds {documents} document file(s) and {label} records beside them; "
                      f"give a glob of the files to read ('{Path(source) / ('*' + suffix)}' for the {label} "
                      f"records{also})")
    if records:
        [(label, op_name, params, _)] = records.values()
        _warn_unread(source, [name for name, f in kinds.items() if f is None or f[0] != label], quiet)
        return op_name, {"path": str(source), **params}
    if not found:
        raise _refuse(source, "the folder holds no file of a known type (subfolders are not read: give a glob "
                      f"such as '{Path(source) / '**' / '*.pdf'}')")
    if set(found) == {"PDF"}:
        _warn_unread(source, [name for name, f in kinds.items() if f is None], quiet)
        return "sources.pdf", {"path": str(source)}
    return "sources.files", {"path": str(source)}


def _warn_unread(source: str | Path, names: list[str], quiet: bool) -> None:
    if names and not quiet:
        shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
        log.warning("%s: %d file(s) not read (another kind than the folder's): %s", source, len(names), shown)


def build_plan(spec: str | Path | dict | None, source: str | Path | dict | None,
               chunk: dict[str, Any] | Literal[False] | None, *, quiet: bool = False,
               encoding: str | None = None, fields: dict[str, str] | None = None) -> IngestPlan:
    """Read, chunk and embed from the spec, with ``source``, ``chunk`` and the read step's ``encoding`` and
    ``fields`` (``id_field``, ``text_field``, ``title_field``) overriding it (``quiet``: no warning about a
    folder's files that are not read)."""
    from operators.registry import get_operator

    flow, spec_settings = load_spec(spec)
    steps = flow.steps if flow is not None else {}
    read = steps.get("read")
    if isinstance(source, dict):
        op_name, params = source["op"], dict(source.get("params") or {})
    elif source is not None:
        op_name, params = _infer_read(source, quiet)
        if read is not None and read.op == op_name:
            params = {**{k: v for k, v in read.params.items() if k not in ("path", "folder")}, **params}
    elif read is not None:
        op_name, params = read.op, dict(read.params)
    else:
        raise IngestError("no source: pass one (a file, a glob, a folder) or a spec with a read step",
                          field="source")
    cls = get_operator(op_name, step="read")
    if cls.scope != "source":
        raise IngestError(f"'{op_name}' is not a source operator", step="read", op=op_name, field="op")
    if encoding is not None:
        if "encoding" not in cls.Params.model_fields:
            raise IngestError(f"encoding='{encoding}' is for sources of text files (JSONL, CSV/TSV, text, Markdown, "
                              f"HTML); the read step '{op_name}' reads none", step="read", op=op_name, field="encoding")
        try:  # named as the caller gave it (--encoding), not as the read step's param
            check_encoding(encoding, lines=getattr(cls, "reads_lines", True))
        except SourceError as err:
            raise IngestError(f"encoding='{encoding}': {err.message}", field="encoding") from None
        params = {**params, "encoding": encoding}
    params = {**params, **_read_fields(fields, cls, op_name)}
    op = cls(params, step_id="read")
    if chunk is False:
        chunk_params = None
    elif chunk is not None:
        chunk_params = dict(chunk)
    else:
        chunk_params = dict(steps["chunk"].params) if "chunk" in steps else None
    if chunk_params is not None:
        from operators.preprocess.chunk import Chunker

        Chunker(chunk_params, step_id="chunk")  # validates
    embed_step = steps.get("embed")
    embed = dict(embed_step.params) if embed_step is not None else {"title_column": "title"}
    options = {}
    if embed_step is not None:
        options = {k: getattr(embed_step, k) for k in ("num_cpus", "num_gpus", "concurrency", "batch_size")
                   if getattr(embed_step, k) is not None}
    enrich = [{"step": step_id, "op": step.op, "params": dict(step.params)}
              for step_id, step in steps.items() if step_id not in FIXED_STEPS]
    placement = embed_step.placement.model_dump() if embed_step is not None and embed_step.placement else None
    return IngestPlan(read=op, chunk=chunk_params, embed=embed, embed_options=options,
                      settings_base=dict(spec_settings or {}), enrich=enrich, embed_placement=placement,
                      chunk_concurrency=steps["chunk"].concurrency if "chunk" in steps else None)


def embed_params(plan: IngestPlan, settings, existing=None) -> dict[str, Any] | None:
    """The embed step's params for an index with ``settings`` (None: BM25 only), its model checked to be the
    index's encoder; ``existing``: the path of the index, when it exists (its encoder is then fixed)."""
    if not settings.dense:
        return None
    embed = {**plan.embed}
    if embed.setdefault("model", settings.encoder) != settings.encoder:
        advice = (f"the index {existing} holds '{settings.encoder}' vectors and keeps its encoder: use a spec whose "
                  f"embed step names '{settings.encoder}' (or no model), or ingest into a new index"
                  if existing is not None else "set index_settings.encoder to it")
        raise IngestError(f"the embed step's model '{embed['model']}' is not the index's encoder "
                          f"'{settings.encoder}'; {advice}", step="embed", field="params.model")
    return embed


def fit_dim(settings, embed: dict[str, Any] | None, given: bool, placement: dict[str, Any] | None = None):
    """The settings with the encoder's dimension when nothing set ``dim``: from the model folder's configuration
    where it states it (no model loaded), else from the model or its deployment (with a ``placement``); a static
    model gives 256 where the default is MiniLM's 384. A set one that differs is refused before anything is
    written, not by the first shard's write."""
    if embed is None:
        return settings
    from flows.ingestion.embedder import embed_operator
    from operators.models.onnx_query_encoder import stated_dimension
    from operators.store import IndexSettings

    op = embed_operator(embed, placement)
    dim = (None if placement else stated_dimension(op.params.model)) or op.dimension  # no model loaded if stated
    if dim == settings.dim:
        return settings
    if given:
        raise IngestError(f"index_settings.dim is {settings.dim} but the encoder '{embed['model']}' gives {dim}-d "
                          f"vectors; set dim to {dim} or leave it out", field="settings.dim")
    return IndexSettings.model_validate({**settings.model_dump(), "dim": dim})


def require_models(embed: dict[str, Any] | None, colbert: str | None) -> None:
    """The encoder and the ``--colbert`` model are on this machine (one error naming both if not), so a
    missing one fails before the index is created, not after the corpus is embedded."""
    from flows.model_check import ModelNeed, check_needs, step_needs

    needs = []
    if embed is not None:
        from operators.embed.sentence_transformer import SentenceTransformerEmbedder

        needs += step_needs("ingest", {"embed": SentenceTransformerEmbedder(embed, step_id="embed")})
    if colbert:
        needs.append(ModelNeed(colbert, "ingest", "colbert", "colbert="))
    check_needs(needs)  # the front doors add how to make each (MissingModelsError.made_by): train is a later job


def index_settings(index_path: Path, settings: Any, base: dict[str, Any]):
    """Complete settings: an IndexSettings as given; a dict overrides the existing index's (or the spec's)."""
    from operators.store import Index, IndexSettings

    if isinstance(settings, IndexSettings):
        return settings
    if settings is not None and not isinstance(settings, dict):
        raise IngestError(f"settings must be IndexSettings or a dict, got {type(settings).__name__}",
                          field="settings")
    exists = (index_path / "manifest.json").exists()
    if exists:
        base = Index.open(index_path).settings.model_dump()
    try:
        return IndexSettings.model_validate({**base, **(settings or {})})
    except ValidationError as err:
        first = err.errors()[0]
        changed = {k: v for k, v in (settings or {}).items() if base.get(k) != v}
        if exists and changed:  # --no-dense into an index of vectors alone: "both are false" of one flag given
            # in JSON, as the index's own refusal says them: true, "flat" (an encoder's name was lowercased)
            has = ", ".join(f"{k}: {json.dumps(base.get(k))}" for k in changed)
            asks = ", ".join(f"{k}: {json.dumps(v)}" for k, v in changed.items())
            raise IngestError(f"the index at {index_path} has {has}, and this asks for {asks}: "
                              f"{plain_message(first)}; an index keeps the settings it was made with (ingest into "
                              "a new index for others)", field="settings") from None
        raise _bad_settings(base, settings or {}) from None


def _bad_settings(base: dict[str, Any], given: dict[str, Any]) -> IngestError:
    """The first problem of the settings ``given`` (``ingest(settings=)``, the command's --no-dense ...) over
    ``base`` (the spec's ``index_settings``) in the words a spec's is told (``spec_checks.index_settings_problem``:
    what the value must be and the value given, not pydantic's "Input should be a valid integer"), its field named
    where it was set: ``settings.KEY`` given, else ``index_settings.KEY``."""
    from flows.spec_checks import index_settings_problem

    problem = index_settings_problem({**base, **given}, yaml=False)
    if problem.key is None:  # a check of the whole (dense and bm25 both false): what the caller asked for
        asks = ", ".join(f"{k}: {json.dumps(v)}" for k, v in given.items())
        over = " over the spec's index_settings" if index_settings_problem(given, yaml=False) is None else ""
        return IngestError(f"{problem}{f'; this asks for {asks}{over}' if asks else ''}",
                           field="settings" if given else "index_settings")
    origin = "settings" if problem.key.split(".")[0] in given else "index_settings"
    return IngestError(str(problem), field=f"{origin}.{problem.key}")


#: The read step's params that ``fields`` may set: which of a record's fields is the id, the text, the title.
READ_FIELDS = ("id_field", "text_field", "title_field")


def _read_fields(fields: dict[str, str] | None, cls: Any, op_name: str) -> dict[str, str]:
    """``fields`` as the read step's params, each checked here so that its error names it as the caller gave it
    (``text_field``, ``--text-field`` on the command line), not as a step's param."""
    if fields is not None and not isinstance(fields, dict):
        raise IngestError(f"fields must be a dict such as {{'text_field': 'body'}}, got {type(fields).__name__} "
                          f"{short_repr(fields)}", field="fields")
    checked = {}
    for name, value in (fields or {}).items():
        if name not in READ_FIELDS:
            raise IngestError(f"fields: '{name}' is none of {', '.join(READ_FIELDS)}", field="fields")
        if name not in cls.Params.model_fields:
            raise IngestError(f"{name}='{value}' is for sources of records (JSONL, CSV/TSV, Parquet); the read step "
                              f"'{op_name}' reads files whole (PDF, text, Markdown, HTML)", step="read", op=op_name,
                              field=name)
        if not isinstance(value, str) or not value.strip():
            raise IngestError(f"{name} must name a field, got {short_repr(value)}", field=name)
        checked[name] = value
    return checked
