"""Every model a piece of work needs, checked before any of it starts.

A flow that needs a model nobody trained yet used to fail at the step that loads it, after the work before that step
(a dense index build can take many minutes), and the error named one model and neither the flow nor the step. Here
each operator declares the models its params name (``Operator.required_models``). For a step that reads an index not
built yet, the encoder of the index that will be built counts too: the flow's ``index_settings.encoder``, when the
step needs vectors (its ``index_features``). Every reference is resolved (``operators.models.resolve_model_path``,
which loads nothing), and one ``MissingModelsError`` names every missing model with each flow and step that needs it.
A model a step loads as a cross-encoder must also be one: a bi-encoder folder there would be refused only when the
step loads it (at a Serve replica's start), so its config.json is read here (``check_cross_encoder``; no weights are
loaded). Likewise a model a step embeds with (``embed.*``'s ``model``, the encoder of an index searched or built)
must not be a cross-encoder or a ColBERT model (``check_sentence_embedder``), which sentence-transformers would load
with an untrained pooling and embed by without a word, and ``rerank.colbert``'s must hold a ColBERT projection, of
this Tessera's format when it is Tessera's own layout (``check_colbert``). A step inside another
(``retrieve.multi_collection``'s postprocessors, ``Operator.nested_operators``) is checked as that step. A language
model's alias (``local``) where such a model belongs is refused as a model of the wrong kind, saying which kind the
step loads.

An environment variable a step reads (an API key), the packages of its extras and its language models' servers are
checked by ``check_env`` (``flows.env_check``, re-exported here).

``tessera run``, ``tessera bench``, ``flows.api.Flow.run`` and ingestion call
``check_models``. A caller that knows how a model is made passes ``how_to_make``. The
train job's ``flows.train.recipe.train_command`` gives the ``tessera train`` command
that makes a name. A step placed on a Serve deployment is skipped, because its model
lives there.

Each error also words its message without this machine's paths (``ModelNotFoundError.public``: a model by the
name it was given, a path by its last part), which the service answers its clients; the CLI prints the paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

# check_env, operator_env and MissingEnvError re-exported: they lived here before ``env_check``
from flows.env_check import MissingEnvError, check_env, operator_env  # noqa: F401
from flows.spec import Flow, FlowSpec
from operators.base import Operator
from operators.errors import SpecError, see_docs
from operators.models.colbert_checks import check_colbert
from operators.models.cross_encoders import check_cross_encoder
from operators.models.references import DEFAULT_ENCODER, ModelNotFoundError, WrongModelKindError
from operators.models.sentence_transformers import check_sentence_embedder

#: Where a step that searches an index by vectors names that index's encoder (``Operator.required_models``).
INDEX_ENCODER = "params.index (its encoder)"
#: The kind of a model a step embeds texts with (``KIND_CHECKS``).
SENTENCE_EMBEDDER = "sentence embedding model"
#: The kind of ``rerank.colbert``'s model.
COLBERT = "ColBERT model"
#: How a model is made (a command), or None when the caller does not know.
HowToMake = Callable[[str], "str | None"]


@dataclass(frozen=True)
class ModelNeed:
    """One step's need for one model: which flow and step, and what names the model there."""

    reference: str
    flow: str
    step: str
    where: str  # "params.model", "params.index (its encoder)", "index_settings.encoder (...)"
    kind: str | None = None  # what the model must be besides present: "cross-encoder", ... (see KIND_CHECKS)

    def describe(self) -> str:
        return f"flow {self.flow}, step {self.step} ({self.where})"

    @property
    def field(self) -> str:
        """The spec's field that names the model: ``steps.rerank.params.model``, ``steps.dense.params.index``, or
        ``index_settings.encoder`` for the index a flow builds."""
        if self.where.startswith("index_settings."):
            return self.where.split(":", 1)[0]
        return f"steps.{self.step}.{self.where.split(' (', 1)[0]}"


class MissingModelsError(ModelNotFoundError):
    """Models that work about to start needs and that are not on this machine; nothing was run. ``public_reasons``:
    each reason worded without this machine's paths (``ModelNotFoundError.public``), for the error's ``public``
    message, which names each model as ``public_name`` does."""

    def __init__(self, missing: dict[str, list[ModelNeed]], reasons: dict[str, str],
                 how_to_make: HowToMake | None = None, wrong_kind: Iterable[str] = (),
                 public_reasons: Mapping[str, str] | None = None):
        from operators.models.references import public_name

        self.missing = missing
        self._given = (reasons, set(wrong_kind), public_reasons)  # for made_by
        wrong_kind = set(wrong_kind)
        #: The needs whose model is here but of another kind than its step loads: the spec's mistake, not the machine's.
        self.wrong_kind = [need for reference in wrong_kind for need in missing.get(reference, [])]
        public_reasons = reasons if public_reasons is None else public_reasons
        parts, public = [], []
        for reference, needs in missing.items():
            hint = how_to_make(reference) if how_to_make is not None else None
            # a folder of another kind: say so (the command that makes the name would not replace it)
            make = f"make it with: {hint}" if hint and reference not in wrong_kind else None
            where = "; ".join(n.describe() for n in needs)
            parts.append(f"'{reference}' for {where}: {make or reasons[reference]}")
            public.append(f"'{public_name(reference)}' for {where}: {make or public_reasons[reference]}")
        wrong = sum(reference in wrong_kind for reference in missing)
        counts = [f"{n} model(s) needed {what}" for n, what in (
            (len(missing) - wrong, "are not on this machine"), (wrong, "are here but not of the kind their step needs"))
            if n]
        head = f"{' and '.join(counts)}, so nothing was run: "
        super().__init__(head + " | ".join(parts), public=head + " | ".join(public))

    def made_by(self, how_to_make: HowToMake) -> "MissingModelsError":
        """The same error saying how each model is made: raised where that is not known (ingestion, which may not
        import the train job), worded by a front door that knows (``tessera ingest``: ``flows.train``)."""
        reasons, wrong_kind, public_reasons = self._given
        return MissingModelsError(self.missing, reasons, how_to_make, wrong_kind, public_reasons)


class IndexEncoderError(SpecError):
    """A flow made for an index of one encoder was given an index embedded with another; nothing was run.
    ``public``: the message with each encoder named as ``public_name`` does (an index records the encoder it was
    built with as given: a path of the machine that built it), for a client of the service."""

    def __init__(self, message: str, *, public: str | None = None, **where: str | None):
        super().__init__(message, **where)
        self.public = message if public is None else public


def model_kind(op: Operator, where: str) -> str | None:
    """What the model at ``where`` of ``op`` must be besides present: a cross-encoder for ``rerank.cross_encoder``'s
    ``params.model`` (its loader refuses any other folder), a ColBERT model for ``rerank.colbert``'s; a sentence
    embedding model for the encoder of an index a step searches and for the ``params.model`` of a step that embeds
    with sentence-transformers; else None. A ``where`` inside a nested operator is that operator's."""
    from operators.analyze.sentiment import SentimentAnalyzer
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder
    from operators.rerank.colbert import ColbertReranker
    from operators.rerank.cross_encoder import CrossEncoderReranker
    from operators.rerank.embedding import EmbeddingReranker
    from operators.retrieve._vector_stores import VectorStoreRetriever

    for prefix, nested in op.nested_operators().items():
        if where.startswith(prefix + "."):
            return model_kind(nested, where.removeprefix(prefix + "."))
    if where.endswith(INDEX_ENCODER):  # also a collection's index inside retrieve.multi_collection
        return SENTENCE_EMBEDDER
    if where != "params.model":
        return None
    if isinstance(op, CrossEncoderReranker):
        return "cross-encoder"
    if isinstance(op, ColbertReranker):
        return COLBERT
    embeds = (SentenceTransformerEmbedder, EmbeddingReranker, VectorStoreRetriever)
    if isinstance(op, embeds) or (isinstance(op, SentimentAnalyzer) and op.params.method == "prototypes"):
        return SENTENCE_EMBEDDER
    return None


def check_model(reference: str, kind: str | None = None) -> Path:
    """The folder of ``reference``, resolved and, for a ``kind``, checked to be one from its config alone;
    raises ``ModelNotFoundError`` (a ``WrongModelKindError`` for a folder of another kind, or for a language model's
    alias, which no such step loads)."""
    from operators.models import resolve_model_path

    from operators.models.references import public_name

    try:
        path = resolve_model_path(reference)
    except ModelNotFoundError:
        if is_language_model(reference):
            wanted = f"a {kind}" if kind else "a model folder"
            raise WrongModelKindError(
                f"not {wanted}: '{reference}' names a language model (an alias `tessera models` lists), which only "
                f"the language-model steps (generate.*, rerank.llm_*) call; this step loads {wanted} by name "
                "(packaged, or trained into $TESSERA_HOME/models by tessera train) or folder") from None
        raise
    if kind is not None:
        KIND_CHECKS[kind](path, public_name(reference))  # its public wording names the model, not the folder
    return path


def is_language_model(reference: str) -> bool:
    """Whether ``reference`` is a language model's alias (``local``, ``gemma2``, one of ``$TESSERA_MODELS``) or
    names the embedded model (``tessera/...``)."""
    from operators.errors import TesseraError
    from operators.llm.aliases import EMBEDDED_PROVIDER, aliases

    try:
        return reference in aliases() or reference.startswith(EMBEDDED_PROVIDER + "/")
    except TesseraError:  # a models file that cannot be read: the run's own check says so
        return False


def operator_problem(op: Operator) -> str | None:
    """Why ``op`` cannot load its models here (the first missing or wrong-kind one), or None: what a Serve
    deployment checks before it starts a replica."""
    error = operator_error(op)
    return None if error is None else error.message


def operator_error(op: Operator) -> ModelNotFoundError | None:
    """``operator_problem``'s error, whose ``public`` wording names no path of this machine (what a client of the
    service is told of a model deployment that is not deployed)."""
    for where, reference in op.required_models().items():
        try:
            check_model(reference, model_kind(op, where))
        except ModelNotFoundError as err:
            return err
    return None


#: What a model of each kind is checked with (reads config.json, at most the weights' tensor names).
KIND_CHECKS: dict[str, Callable[[Path, str], None]] = {"cross-encoder": check_cross_encoder,
                                                  SENTENCE_EMBEDDER: check_sentence_embedder,
                                                  COLBERT: check_colbert}


def step_needs(flow_name: str, operators: Mapping[str, Operator]) -> list[ModelNeed]:
    """The models each of ``operators`` (by step id) declares."""
    return [ModelNeed(reference, flow_name, step, where, model_kind(op, where))
            for step, op in operators.items() for where, reference in op.required_models().items()]


def flow_needs(flow: Flow | FlowSpec, name: str | None = None) -> list[ModelNeed]:
    """Every model the steps that a flow's output depends on need, with the encoder of an index
    that will be built for it (``index_settings.encoder``) at each step that needs vectors.
    ``name``: what to call the flow (a benchmark's name for it), default its spec's name."""
    built = flow if isinstance(flow, Flow) else flow.build()
    spec = built.spec
    name = name or built.name
    steps = [s for s in built.needed_steps() if spec.steps[s].placement is None]
    needs = step_needs(name, {s: built.operators[s] for s in steps})
    unset = spec.unset_index_steps()
    made_for = (spec.index_settings or {}).get("encoder")
    for step in steps:
        if "dense" not in built.operators[step].index_needs():
            continue
        if step in unset:
            needs.append(ModelNeed(made_for or DEFAULT_ENCODER, name, step,
                                   "index_settings.encoder: the index built for it", SENTENCE_EMBEDDER))
        elif made_for and getattr(built.operators[step].params, "index", None) and not any(
                need.step == step and need.where == INDEX_ENCODER and _same_model(need.reference, made_for)
                for need in needs):
            # an index given, embedded with another model: one embedded with this model is needed
            # (check_index_encoders), and first the model itself
            needs.append(ModelNeed(made_for, name, step, "index_settings.encoder: the index it is made for",
                                   SENTENCE_EMBEDDER))
    return needs


def check_needs(needs: Iterable[ModelNeed], *, how_to_make: HowToMake | None = None) -> None:
    """Raise ``MissingModelsError`` naming every need whose model does not resolve, or is not of its kind."""
    missing: dict[str, list[ModelNeed]] = {}
    reasons: dict[str, str] = {}
    public: dict[str, str] = {}
    wrong_kind: set[str] = set()
    problems: dict[tuple[str, str | None], ModelNotFoundError | None] = {}  # checked once per (reference, kind)
    for need in needs:
        if (need.reference, need.kind) not in problems:
            try:
                check_model(need.reference, need.kind)
                problems[need.reference, need.kind] = None
            except ModelNotFoundError as err:
                problems[need.reference, need.kind] = err
                if isinstance(err, WrongModelKindError):
                    wrong_kind.add(need.reference)
        problem = problems[need.reference, need.kind]
        if problem is None:
            continue
        reasons.setdefault(need.reference, problem.message)
        public.setdefault(need.reference, problem.public)
        if need not in missing.setdefault(need.reference, []):
            missing[need.reference].append(need)
    if missing:
        raise MissingModelsError(missing, reasons, how_to_make, wrong_kind, public)


def check_models(flows: Iterable[Flow | FlowSpec] | Mapping[str, Flow | FlowSpec], *,
                 how_to_make: HowToMake | None = None) -> None:
    """Check that every model ``flows`` (or flows by name) need is on this machine, before any of them runs, and
    that each index a flow searches by vectors was embedded with the encoder the flow is made for."""
    named = flows.items() if isinstance(flows, Mapping) else ((None, flow) for flow in flows)
    # each flow built once, for all the checks (a list: unnamed flows all had the key None in a dict, and only the
    # last of them was checked)
    needs = [(built, flow_needs(built, flow_name)) for flow_name, built in
             ((name, flow if isinstance(flow, Flow) else flow.build()) for name, flow in named)]
    # what the index lacks, then every model missing (with how to make each), then which encoder the index has: an
    # index without vectors was told it had the wrong encoder, and a flow whose models are not made yet was told
    # to ingest with one of them
    for built, _ in needs:
        check_index_features(built)
    check_needs([need for _, flow_needed in needs for need in flow_needed], how_to_make=how_to_make)
    for built, flow_needed in needs:
        check_index_encoders(built, flow_needed)


def check_index_encoders(flow: Flow | FlowSpec, needs: Iterable[ModelNeed]) -> None:
    """Refuse a flow made for an index of one encoder (``index_settings.encoder``: ``hybrid_ft``, ``dense_static``)
    given an index embedded with another: its dense step would search with the index's encoder, and the run would
    be another flow's under this one's name."""
    spec = flow.spec if isinstance(flow, Flow) else flow
    wanted = (spec.index_settings or {}).get("encoder")
    if not wanted:
        return
    from operators.models.references import public_name

    for need in needs:
        if need.where == INDEX_ENCODER and not _same_model(need.reference, wanted):
            def message(made_for: str, found: str) -> str:
                return (f"flow {need.flow} is made for an index embedded with '{made_for}' (its index_settings."
                        f"encoder), but step {need.step} searches an index embedded with '{found}': ingest an index "
                        f"with an ingest spec whose index_settings.encoder is '{made_for}', or run a flow made for "
                        f"this index (hybrid, dense); see {see_docs('ingestion')}")

            raise IndexEncoderError(message(wanted, need.reference),
                                    public=message(public_name(wanted), public_name(need.reference)),
                                    step=need.step, field=f"steps.{need.step}.params.index")


def check_index_features(built: Flow) -> None:
    """Refuse a step that searches an index by what the index was built without (vectors, BM25 statistics), before
    any step runs (a ``SpecError``, the service's 422): the retriever's own check came when the step ran, after the
    steps before it (an LLM's rewrite, a BM25 search over every query). An index that does not open is left to the
    step, which names that error."""
    from operators.retrieve._index_retriever import missing_feature, shared_index
    from operators.store import IndexStoreError, resolve_index

    for step in built.needed_steps():
        op = built.operators[step]
        index = getattr(op.params, "index", None)
        if built.spec.steps[step].placement is not None or not isinstance(index, str) or not index:
            continue
        try:
            settings = shared_index(resolve_index(index)).settings
        except IndexStoreError:
            continue
        if (error := missing_feature(op, index, settings)) is not None:  # the spec's mistake, as a wrong encoder is
            raise SpecError(error.message, op=op.name, step=step, field=f"steps.{step}.params.index")


def _same_model(a: str, b: str) -> bool:
    """Whether two model references name the same model (the same name, or the same folder once resolved)."""
    if a == b:
        return True
    from operators.models import resolve_model_path

    try:
        return resolve_model_path(a).resolve() == resolve_model_path(b).resolve()
    except ModelNotFoundError:
        return False
