"""The flows of a benchmark: ``--flow NAME=SPEC`` values, resolved and validated.

SPEC is anything ``FlowSpec.load`` accepts: a spec file, a built-in flow
(``flows/specs/NAME.yaml``) or a saved flow. ``--flow NAME`` alone means
``NAME=NAME``, and ``--flow path/to/NAME.yaml`` alone means ``NAME=path/to/NAME.yaml``.
Names are unique and become file names, so they are restricted to letters, digits,
``_``, ``.`` and ``-``.

A flow the benchmark cannot measure is refused here, before anything runs: an ingestion
flow (a ``sources.*`` step: it reads documents and writes an index, ``tessera ingest``),
and a flow with a step that names its own index (``params.index`` set): the benchmark
builds the dataset's index for the steps that leave ``index`` unset, and a step that
searches another index would score every query 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from flows.bench.errors import BenchError
from flows.spec import FlowSpec
from flows.store import SPEC_SUFFIXES

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


@dataclass(frozen=True)
class BenchFlow:
    name: str
    source: str
    spec: FlowSpec


def parse_flow_arg(value: str) -> tuple[str, str]:
    """``NAME=SPEC`` (or ``NAME``) -> (name, spec source); a bad value names itself."""
    name, sep, source = value.partition("=")
    name, source = name.strip(), (source.strip() if sep else name.strip())
    if not sep and Path(source).suffix.lower() in SPEC_SUFFIXES:  # a spec file alone: named after the file
        name = Path(source).stem
    if not name or not source:
        raise BenchError(f"bad --flow value '{value}': use NAME=SPEC (a spec file, built-in or saved flow)",
                         field="flow")
    if not NAME.match(name):
        raise BenchError(f"bad --flow value '{value}': the name '{name}' starts with a letter or digit, then holds "
                         "letters, digits, '_', '.' and '-', 64 characters at most", field="flow")
    return name, source


def resolve_flows(values: list[str]) -> list[BenchFlow]:
    """Parse, load and validate every ``--flow`` before anything runs."""
    from operators.errors import TesseraError

    if not values:
        raise BenchError("give at least one --flow NAME=SPEC", field="flow")
    flows: list[BenchFlow] = []
    seen: set[str] = set()
    for value in values:
        name, source = parse_flow_arg(value)
        if name in seen:
            raise BenchError(f"bad --flow value '{value}': the name '{name}' is used twice (give another one: "
                             "--flow OTHER=SPEC)", field="flow")
        seen.add(name)
        try:
            spec = FlowSpec.load(source)
            built = spec.build()
        except TesseraError as err:
            raise BenchError(f"bad --flow value '{value}': {err}", field="flow") from None
        refuse_unmeasurable(value, built)
        flows.append(BenchFlow(name=name, source=source, spec=spec))
    return flows


def refuse_unmeasurable(value: str, built) -> None:
    """A ``BenchError`` for a flow that does not search the dataset's index for its queries."""
    for step in built.needed_steps():
        op = built.operators[step]
        if op.scope == "source":
            raise BenchError(f"bad --flow value '{value}': flow '{built.name}' is an ingestion flow (step '{step}', "
                             f"{op.name}, reads documents and writes an index), not a flow that searches for "
                             "queries: benchmark a retrieval flow (e.g. bm25, hybrid); the benchmark builds the "
                             "dataset's index itself", field="flow")
    for step, index in built.spec.named_indices().items():
        if step in built.needed_steps():
            raise BenchError(f"bad --flow value '{value}': step '{step}' searches its own index {index!r} "
                             "(params.index), not the dataset's: the benchmark builds the dataset's index for the "
                             "steps that leave params.index unset; remove params.index from the spec (its "
                             "index_settings choose the encoder)", field="flow")


def spec_summary(spec: FlowSpec) -> str:
    """One line: ``step: op(k=v, ...) -> ...`` (for MLflow params and the report)."""
    parts = []
    for step_id, step in spec.steps.items():
        params = ", ".join(f"{k}={v}" for k, v in sorted(step.params.items()))
        parts.append(f"{step_id}: {step.op}({params})")
    return " -> ".join(parts)


def refuse_no_ranking(flow: BenchFlow) -> None:
    """A flow whose output holds no ranking (``qid, docno`` and ``rank`` or ``score``), refused before any index is
    built or any flow runs: it was refused once it had run. Said only of a flow of built-in operators, whose
    ``produces()`` the contract tests hold to what they write; a plugin's step may add columns it does not declare.
    A flow that answers (``generate.answer``: ``answer_only``) is measured by its answers."""
    built = flow.spec.build()
    ops = [built.operators[step] for step in built.needed_steps()]
    if any(op.name == "generate.answer" or not type(op).__module__.startswith("operators.") for op in ops):
        return
    roles = built.roles()
    if "docno" not in roles or not {"rank", "score"} & set(roles):
        written = ", ".join(sorted(roles)) or "no column"
        raise BenchError(f"flow '{flow.name}' returns no ranking: its steps write {written}; a benchmark needs qid, "
                         "docno and rank or score (a retrieval step)", field="flow")
