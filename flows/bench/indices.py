"""Indices a flow needs, built from the dataset's corpus and reused by content.

A step needs an index when its operator's ``Params`` has an ``index`` field and the
spec leaves it unset. The index is built with ``flows.ingest.ingest`` from the
dataset's ``corpus.jsonl``, dense (with embeddings) only when some step of the flow
searches vectors, with the spec's ``index_settings`` (an encoder, BM25 options),
into ``<root>/<key>`` where ``root`` is ``--index-dir`` or
``$TESSERA_HOME/indices/auto`` and ``key`` hashes the corpus's sha256 and the
settings JSON, where a dense index's encoder is its weights' fingerprint
(``operators.models.fingerprint``, as the step cache keys it), not the reference
that named it: one model by name, by path or by an alias is one index. A complete
index under the key of before (which hashed the reference) is still found and used,
else the index is built under the new key; so is one built while BM25's default tokens were 'unicode', when
its text holds no CJK, which 'cjk_bigrams' cuts alike (``holds_cjk``). An index is reused when its
``<key>.done.json`` marker exists (written after ingestion returned) and it opens; a
half-built one is handed to ``ingest`` again, which resumes it.

Documents of the corpus that failed to ingest (an unreadable line, a record without
text: ``<index>/failures.jsonl``) are not in the index; ``failed_documents`` counts
them, built now or reused, and the benchmark warns, as the measures then count every
relevant document among them as not found.

The flow that runs gets the index path; the spec that keys the run cache gets
``auto:<key>/g<generation>`` instead, so moving ``--index-dir`` does not invalidate
runs, and a rebuilt or changed index does.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from flows.spec import FlowSpec

#: The BM25 tokens rule new indices got before 'cjk_bigrams'. A benchmark's index built under it is
#: keyed by it: one whose text has no CJK is cut alike and is used, where the new key built it again (a dense
#: index's embedding too) after the upgrade.
TOKENS_BEFORE = "unicode"


@dataclass(frozen=True)
class IndexPlan:
    key: str
    path: Path
    dense: bool
    settings: Any  # operators.store.IndexSettings
    settings_json: str

    @property
    def marker(self) -> Path:
        return self.path.parent / f"{self.path.name}.done.json"


def default_root() -> Path:
    from flows.store import tessera_home

    return tessera_home() / "indices" / "auto"


def index_settings(spec: FlowSpec) -> Any:
    """The settings of the index a flow's unset index steps search: its spec's ``index_settings``, ``dense`` as its
    steps need, ``bm25`` on when one needs it; a ``SpecError`` naming ``index_settings.KEY`` when they are wrong."""
    from pydantic import ValidationError

    from operators.errors import SpecError
    from operators.store import IndexSettings
    from operators.store.settings import settings_problem

    features = spec.index_features()
    wanted = {**(spec.index_settings or {}), "dense": "dense" in features}
    if "bm25" in features:
        wanted["bm25"] = True
    try:
        return IndexSettings.model_validate(wanted)
    except ValidationError:  # said as Index.create and a spec's index_settings say it
        problem = settings_problem(wanted)
        raise SpecError(f"bad index settings: {problem.message}",
                        field="index_settings" + (f".{problem.key}" if problem.key else "")) from None


def plan_index(spec: FlowSpec, corpus_sha256: str, root: Path) -> IndexPlan | None:
    """The index this flow needs (None when no step needs one).

    The spec's ``index_settings`` (e.g. ``encoder: tessera-bi-encoder``) are honoured;
    ``dense`` follows what the steps need, and ``bm25`` is on when a step needs it.
    The key of a dense index hashes its encoder's files instead of the encoder's name, so
    retraining a model under the same name builds a new index instead of reusing vectors
    from the old weights, and naming one model two ways does not build it twice.
    """
    if not spec.unset_index_steps():
        return None
    settings = index_settings(spec)
    plan = _plan_for(settings, corpus_sha256, root)
    if plan.marker.is_file() or settings.tokens != "cjk_bigrams" or "tokens" in (spec.index_settings or {}):
        return plan
    before = _plan_for(settings.model_copy(update={"tokens": TOKENS_BEFORE}), corpus_sha256, root)
    if is_complete(before) and not (settings.bm25 and holds_cjk(before.path, settings.text_fields)):
        return before  # built before 'cjk_bigrams' was the default, and cut alike: its text has no CJK
    return plan


def _plan_for(settings: Any, corpus_sha256: str, root: Path) -> IndexPlan:
    """The plan of an index of ``settings``: keyed by its encoder's weights, or found under the key of before."""
    from operators.models import DEFAULT_ENCODER
    from operators.models.fingerprint import weights_fingerprint

    dense = settings.dense
    dumped = settings.model_dump(mode="json")
    settings_json = _canonical(dumped)
    if not dense:  # no vectors: the encoder does not matter, and the key is what it always was
        return _plan(_key(corpus_sha256, settings_json), root, dense, settings, settings_json)
    fingerprint = weights_fingerprint(settings.encoder)
    plan = _plan(_key(corpus_sha256, _canonical({**dumped, "encoder": f"weights:{fingerprint}"})), root, dense,
                 settings, settings_json)
    if not plan.marker.is_file():  # an index built under the key of before (by the encoder's name) still serves
        legacy = f"{corpus_sha256}\n{settings_json}"
        if settings.encoder != DEFAULT_ENCODER:
            legacy += f"\nencoder:{fingerprint}"
        old = _plan(_key(legacy), root, dense, settings, settings_json)
        if old.marker.is_file() and is_complete(old):
            return old
    return plan


def holds_cjk(path: Path, fields: list[str]) -> bool:
    """Whether the BM25 text of the index at ``path`` (its shards' ``fields``) has a Chinese, Japanese or Korean
    word character, which 'cjk_bigrams' cuts otherwise than 'unicode' does; text without one is cut alike."""
    import pyarrow.parquet as pq

    from operators.store.cjk import has_cjk

    for docs in sorted(Path(path).glob("shards/*/docs.parquet")):
        names = set(pq.read_schema(docs).names)
        table = pq.read_table(docs, columns=[field for field in fields if field in names])
        for column in table.columns:
            for chunk in column.chunks:
                if has_cjk("\n".join(text for text in chunk.to_pylist() if isinstance(text, str))):
                    return True
    return False


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _plan(key: str, root: Path, dense: bool, settings: Any, settings_json: str) -> IndexPlan:
    return IndexPlan(key=key, path=Path(root) / key, dense=dense, settings=settings, settings_json=settings_json)


def is_complete(plan: IndexPlan) -> bool:
    if not (plan.marker.is_file() and plan.path.is_dir()):
        return False
    try:
        from operators.store import Index

        Index.open(plan.path, verify=False)
    except Exception:  # noqa: BLE001 - an index that does not open is rebuilt
        return False
    return True


def identity(plan: IndexPlan) -> str:
    """``auto:<key>/g<generation>``: what the corpus and settings are, and which build of them."""
    from operators.store import Index

    return f"auto:{plan.key}/g{Index.open(plan.path, verify=False).generation}"


def ensure_index(plan: IndexPlan, corpus: Path, *, executor: str = "local",
                 log: Callable[[str], None] = print, progress: bool = True) -> bool:
    """Build the index unless a complete one is there; True when it was built now."""
    if is_complete(plan):
        return False
    from flows.ingestion import ingest

    plan.path.parent.mkdir(parents=True, exist_ok=True)
    log(f"building index {plan.path} from {corpus} ({'dense + ' if plan.dense else ''}bm25)")
    start = time.perf_counter()
    report = ingest(str(corpus), str(plan.path), settings=plan.settings, executor=executor, progress=progress)
    seconds = time.perf_counter() - start
    plan.marker.write_text(json.dumps({"corpus": str(corpus), "settings": json.loads(plan.settings_json),
                                       "seconds": round(seconds, 3), "report": _jsonable(report)},
                                      indent=2, default=str), encoding="utf-8")
    log(f"built index {plan.key} in {seconds:.1f} s")
    return True


def failed_documents(plan: IndexPlan) -> int:
    """How many corpus documents are not in the index because they failed to ingest (the ledger's open
    failures, in ``<index>/failures.jsonl``); a repeated id is not one of them: its first copy is in the index."""
    from flows.ingestion.ledger import open_failures_at

    return sum(not f.error.startswith("duplicate id ") for f in open_failures_at(plan.path))


def _jsonable(report: Any) -> Any:
    if hasattr(report, "model_dump"):
        return report.model_dump(mode="json")
    if hasattr(report, "to_dict"):
        return report.to_dict()
    import dataclasses

    return dataclasses.asdict(report) if dataclasses.is_dataclass(report) else str(report)
