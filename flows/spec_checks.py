"""Checks of a built flow that look across steps: fusion branches, declarations, fan-ins, filters.

``FlowSpec.build()`` runs ``check_declarations``, ``check_branches`` and ``warn_unfused_fan_ins``;
``Flow.check_filters`` runs ``filters_outside_index``. The input columns each step needs are checked by
``flows.spec_columns``.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Mapping, get_args

import pyarrow as pa

from flows.spec_columns import index_columns, param_naming
from operators.declarations import Role
from operators.errors import OperatorError, SpecError, TesseraError, short_repr
from operators.raised_at import raised_at

log = logging.getLogger(__name__)

#: A step id: it names columns (``rank_<step>``), cache entries and log lines, so it is a plain name.
STEP_ID_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")

#: The columns that say whose each row is, and what they hold: only a step that writes them as ids may.
ID_COLUMNS = {"qid": "each row's query id (rows are grouped, fused and answered by it)",
              "docno": "each row's document id (rows are fused, deduplicated and cited by it)",
              "doc_id": "each passage's document id (passages are grouped by it, and a TREC run names it)"}
#: The current ranking's columns: only a step that ranks (role ``rank``/``score``) writes them.
RANKING_COLUMNS = {"rank": "each row's current rank (postprocess.reduce keeps the top k by it, a TREC run lists it)",
                   "score": "each row's current score (the ranking a later step reads)"}

#: Fan-ins already warned about in this process: (flow name, step, its inputs).
_WARNED: set[tuple[str, str, tuple[str, ...]]] = set()


def check_step_ids(steps: Any) -> None:
    """Every step id is text matching ``STEP_ID_PATTERN``; the error names the id, and its key (``steps.ID``), so
    that a spec from a file names the id's line, not the line of ``steps:``."""
    if not isinstance(steps, dict):
        return
    from flows.spec_errors import SettingProblem

    for step_id in steps:
        if step_id is None:  # an empty key, ~ or null: YAML's null is no text, and nothing to quote
            raise SettingProblem("a step id is empty (null: an empty key, ~ or null): give the step a name such as "
                                 "bm25")
        if not isinstance(step_id, str):
            number = isinstance(step_id, (int, float)) and not isinstance(step_id, bool)
            kind = "a number" if number else "YAML's true/false (unquoted yes, no, on, off)" if isinstance(
                step_id, bool) else f"a {type(step_id).__name__}"  # a date: 2024-01-01
            shown = str(step_id).lower() if isinstance(step_id, bool) else str(step_id)
            # its key where the file writes it as shown (1, not yes for true), so the error names the id's line
            raise SettingProblem(f"step id {shown} is {kind}, not a name: quote it in YAML ('{shown}':) or use a "
                                 "name such as bm25 (and quote it where inputs name it too)", shown if number else None)
        if not STEP_ID_PATTERN.fullmatch(step_id):
            raise SettingProblem(_bad_step_id(step_id), step_id or None)


def _bad_step_id(step_id: str) -> str:
    """Why ``step_id`` is no name, in words: too long (said by its length, not written out again), a letter that is
    not ASCII (``é``, a Cyrillic ``а`` that looks like a Latin one), or the rule."""
    rule = ("use 1-100 ASCII letters, digits, '_', '.' or '-', starting with a letter, digit or '_' (it names the "
            "step's rank_<step> column)")
    if len(step_id) > 100:
        return f"a step id has at most 100 characters, this one has {len(step_id)}: {rule}"
    other = next((char for char in step_id if not char.isascii()), None)
    why = f" ({other!r}, U+{ord(other):04X}, is not ASCII)" if other else ""
    return f"step id {step_id!r} is not a valid name{why}: {rule}"


def unused_index(spec: Any, given: str, drop: str) -> SpecError | None:
    """The error for an index ``given`` to fill a flow's unset ones (``tessera run --index``, ``Flow.load``'s
    ``index=``) that no step would search: the flow names its own, or reads none. Ignored, the run searched another
    index than the one given, or none; ``drop``: how to leave it out."""
    if spec.unset_index_steps():
        return None
    for step, own in spec.named_indices().items():
        return SpecError(f"{given} would not be used: flow '{spec.name}' names its own index (step '{step}' searches "
                         f"{own!r}); {drop}, or run a spec that leaves params.index unset", step=step, field="index")
    return SpecError(f"{given} would not be used: flow '{spec.name}' reads no index; {drop}", field="index")


def ancestors(step: str, inputs: dict[str, tuple[str, ...]]) -> set[str]:
    """Every step whose output reaches ``step``, through its inputs."""
    seen: set[str] = set()
    stack = list(inputs[step])
    while stack:
        parent = stack.pop()
        if parent not in seen:
            seen.add(parent)
            stack.extend(inputs[parent])
    return seen


def check_branches(ids: list[str], inputs: dict[str, tuple[str, ...]], operators: dict[str, Any]) -> None:
    """A fusion step's branches (``branch_steps()``) are steps above it that rank (declare ``rank_<step>``)."""
    for step, op in operators.items():
        branch_steps = getattr(op, "branch_steps", None)
        if branch_steps is None:
            continue
        explicit = bool(getattr(op.params, "branches", None))
        where = "params.branches" if explicit else "inputs"
        above = ancestors(step, inputs)
        reachable, cut = _rows_reaching(step, inputs, operators)
        for branch in branch_steps():
            if branch not in operators:
                raise SpecError(f"{where} names '{branch}', which is not a step of this flow (steps: "
                                f"{', '.join(ids)})", step=step, op=op.name, field=f"steps.{step}.{where}")
            if branch not in above:
                raise SpecError(f"{where} names '{branch}', which is not above this step (its input does not "
                                f"come from it), so it has no ranking here", step=step, op=op.name,
                                field=f"steps.{step}.{where}")
            if branch not in reachable:
                searcher = next(s for s in ids if s in cut and branch in ancestors(s, inputs))
                raise SpecError(f"{where} names '{branch}', whose ranking does not reach this step: '{searcher}' "
                                f"({operators[searcher].name}) between them searches from the queries alone, and "
                                f"its rows carry no ranking of the steps before it; give this step both as inputs "
                                f"(inputs: [{branch}, {searcher}])", step=step, op=op.name,
                                field=f"steps.{step}.{where}")
            if f"rank_{branch}" not in operators[branch].produces():
                ranking = [s for s in ids if s in above and f"rank_{s}" in operators[s].produces()]
                raise SpecError(f"branch '{branch}' ({operators[branch].name}) does not rank: it writes no "
                                f"rank_{branch} column to fuse; set params.branches to steps that rank"
                                + (f" (above this step: {', '.join(ranking)})" if ranking else ""),
                                step=step, op=op.name, field=f"steps.{step}.{where}")


def _searches_anew(op: Any) -> bool:
    """Whether a step makes its rows from the queries alone (a retriever: it reads qid and query, writes docno),
    so the rows before it do not reach the steps after it."""
    reads = op.reads()
    return (op.scope == "query" and reads is not None and set(reads) <= {"qid", "query"}
            and "docno" in op.produces())


def _rows_reaching(step: str, inputs: dict[str, tuple[str, ...]],
                   operators: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The steps above ``step`` whose rows (and ranking columns) reach it, and the searching steps that cut the
    others off: a path through a retriever carries that retriever's rows, not the rows of the steps before it."""
    reaching: set[str] = set()
    cut: set[str] = set()
    stack = list(inputs[step])
    while stack:
        parent = stack.pop()
        if parent in reaching:
            continue
        reaching.add(parent)
        if _searches_anew(operators[parent]):
            cut.add(parent)
        else:
            stack.extend(inputs[parent])
    return reaching, cut


def check_declarations(order: list[str], operators: dict[str, Any]) -> None:
    """Refuse a step whose operator declares its columns in a shape the engine cannot read, naming the step and
    the operator (a plugin's code, so an ``OperatorError``): ``produces()`` other than ``{column: role}`` with
    the roles of ``operators.declarations.Role`` (a list of columns failed below with a bare AttributeError naming no
    step), ``reads()``/``requires()``/``required_columns()`` other than a list of column names (the text ``"text"``
    was read as the columns t, e, x, t), or one of them raising."""
    for step in order:
        op = operators[step]
        for method in ("produces", "reads", "requires", "required_columns"):
            try:
                declared = getattr(op, method)()
            except TesseraError:
                raise
            except Exception as err:  # a plugin's bug: name its step, not a frame of the build
                raise OperatorError(f"its {method}() failed: {type(err).__name__}: {err}{raised_at(err, type(op))}",
                                    step=step, op=op.name) from err
            if problem := (_roles_problem(declared) if method == "produces"
                           else _columns_problem(declared, none_ok=method == "reads")):
                raise OperatorError(f"its {method}() {problem}", step=step, op=op.name)


def _roles_problem(declared: Any) -> str | None:
    roles = ", ".join(get_args(Role))
    if not isinstance(declared, Mapping):
        return f"returned {short_repr(declared)}, not a dict {{column: role}} (roles: {roles})"
    for column, role in declared.items():
        if not isinstance(column, str) or role not in get_args(Role):
            return f"gives column {short_repr(column)} the role {short_repr(role)}, which is none of {roles}"
    return None


def _columns_problem(declared: Any, *, none_ok: bool) -> str | None:
    if declared is None and none_ok:
        return None
    if not isinstance(declared, (list, tuple)) or not all(isinstance(c, str) for c in declared):
        return (f"returned {short_repr(declared)}, not a list of column names"
                + (" (None: every column)" if none_ok else ""))
    return None


def check_rankings_kept(order: list[str], operators: dict[str, Any]) -> None:
    """Refuse a step that writes another step's ranking column (``rank_<step>``, ``score_<step>``) under that
    step's name: an ``analyze.word_count`` with ``output_column: rank_bm25`` gave a fusion word counts for bm25's
    ranks, and nothing said so. Nor may a step write a summary or a marking into ``qid`` or ``docno``, which say
    whose each row is (``summarize.documents`` with ``output_column: qid`` failed at run time, naming no param)."""
    for step in order:
        for column, role in operators[step].produces().items():
            kind, _, owner = column.partition("_")
            param = param_naming(operators[step], column, "op")
            if kind in ("rank", "score") and owner in operators and owner != step:
                holds = f"step '{owner}'s ranking (steps after it read it, a fusion too)"
                # no param names it (retrieve.multi_hop's score_dense): the other step's id is what can change
                advice = f"rename step '{owner}'" if param == "op" else f"give its output another name ({param})"
            elif column in ID_COLUMNS and role != "id" or column in RANKING_COLUMNS and role != column:
                named = f" ({param})" if param != "op" else ""
                holds, advice = {**ID_COLUMNS, **RANKING_COLUMNS}[column], f"give its output another name{named}"
            else:
                continue
            raise SpecError(f"it writes column '{column}', which holds {holds}; {advice}",
                            step=step, op=operators[step].name, field=f"steps.{step}.{param}")


def check_metadata_keys(ids: list[str], operators: dict[str, Any]) -> None:
    """Refuse two steps that write the same per-query metadata key (``Operator.metadata_keys``: two
    ``generate.answer`` steps, a ``summarize.results`` whose ``output_key`` is ``answer``): the later step's value
    replaced the earlier's for every query, and nothing said so."""
    writers: dict[str, str] = {}
    for step in ids:
        keys = sorted(operators[step].metadata_keys())
        if taken := [key for key in keys if key in writers]:
            first = writers[taken[0]]
            shared = ", ".join(f"'{key}'" for key in taken if writers[key] == first)
            keyed = "output_key" in type(operators[step].params).model_fields
            raise SpecError(f"steps '{first}' ({operators[first].name}) and '{step}' ({operators[step].name}) both "
                            f"write the query metadata {shared}: the later would replace the earlier's for every "
                            "query; keep one of them" + (", or give this one another output_key" if keyed else ""),
                            step=step, field=f"steps.{step}." + ("params.output_key" if keyed else "op"))
        writers.update(dict.fromkeys(keys, step))


def warn_unfused_fan_ins(name: str, inputs: dict[str, tuple[str, ...]], operators: dict[str, Any]) -> list[str]:
    """Warn (once per process and fan-in) when a step that does not fuse reads several rankings: their union
    holds a document once per branch that found it, each row with its own branch's ``rank``."""
    warnings = []
    for step, parents in inputs.items():
        op = operators[step]
        if len(parents) < 2 or getattr(op, "branch_steps", None) is not None:
            continue
        ranking = [p for p in parents if "rank" in operators[p].produces()]
        if len(ranking) < 2:
            continue
        which = "which each rank" if len(ranking) == len(parents) else f"of which {', '.join(ranking)} each rank"
        message = (f"{f'flow {name!r}: ' if name else ''}step '{step}' ({op.name}) reads the union of "
                   f"{', '.join(parents)}, {which}: a document "
                   "found by several of them appears once per branch, with that branch's rank; to merge "
                   "the rankings into one, read them through a fuse step (fuse.rrf, fuse.weighted)")
        warnings.append(message)
        key = (name, step, parents)
        if key not in _WARNED:
            _WARNED.add(key)
            log.warning("%s", message)
    return warnings


def filters_outside_index(step: str, op: Any) -> list[SpecError]:
    """A retriever's ``filter`` (and those of the retrievers a step runs inside itself) naming columns its index does
    not hold, as its manifest lists them (not asked where the index is unset or cannot be read), in the words the
    search would fail with once the steps in front of it (a language model's rewrite of the query) had run."""
    errors = []
    for where, nested in op.walk(f"steps.{step}"):
        flt = getattr(getattr(nested, "params", None), "filter", None)
        if not callable(getattr(flt, "to_expression", None)) or (held := index_columns(nested)) is None \
                or flt.columns() <= held:
            continue
        try:  # a column missing is said before any condition is compiled for the (unknown) column types
            flt.to_expression(pa.schema([(name, pa.null()) for name in sorted(held)]))
        except SpecError as err:  # the search's FilterError
            errors.append(SpecError(err.message, step=step, op=nested.name, field=f"{where}.params.filter"))
    return errors


def check_index_settings(value: dict[str, Any] | None) -> None:
    """A spec's ``index_settings`` as ``operators.store.IndexSettings`` reads them, when the spec is loaded: a
    misspelt key (with the close names) or a bad value was refused only by the ingestion or benchmark that built
    the index, and ``tessera flows save`` kept the flow. The error names its key (``SettingProblem``)."""
    if (problem := index_settings_problem(value)) is not None:
        raise problem


def index_settings_problem(value: dict[str, Any] | None, *, yaml: bool = True) -> Any:
    """The first ``SettingProblem`` of ``value`` (``check_index_settings``), or None; ``yaml``: the settings were
    written in YAML (a spec), whose unquoted ``no`` is a boolean: a bool where a string is wanted says so. Ingestion
    says a problem of settings merged from a spec and a caller in the same words (``flows.ingestion.plan``)."""
    if not value:
        return None
    from flows.spec_errors import SettingProblem, yaml_bool_hint
    from operators.store.settings import settings_problem

    if (problem := settings_problem(value)) is None:
        return None
    message = problem.message
    if yaml and isinstance(problem.given, bool):
        message = yaml_bool_hint(message)  # stopwords: no (Norwegian) is YAML's False
    return SettingProblem(message, problem.key)
