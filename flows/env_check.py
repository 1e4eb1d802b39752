"""What a run needs of this machine besides model files, checked before its first step: the environment variables
its steps read, the packages of the extras they need, and the servers their language models are on.

An environment variable a step reads (``Operator.required_env``: ``rerank.api``'s
``api_key_env``, the ``api_key_env`` of a language model step's alias) is checked by
``check_env``, which both executors, ``tessera bench`` (before it builds an index) and the service's request
preparation call before a run's first step: an unset key was found only at its step, after the retrieval before
it; so was an Ollama server that does not answer. A step inside another (``Operator.nested_operators``) is
checked as that step, its param named in full (``params.postprocess.0.params.api_key_env``).

Why apart from ``flows.model_check``: that module resolves the models a flow names; this asks the environment.
``flows.model_check`` re-exports ``check_env``, ``operator_env`` and ``MissingEnvError``.
"""

from __future__ import annotations

from flows.spec import Flow, FlowSpec
from operators.base import Operator
from operators.errors import SpecError


class MissingEnvError(SpecError):
    """Steps that read environment variables (an API key) that are not set here; nothing was run. ``missing``:
    each (step, the param that names the variable, the variable)."""

    def __init__(self, message: str, missing: list[tuple[str, str, str]] | None = None, **where: str | None):
        super().__init__(message, **where)
        self.missing = missing or []


def check_env(flow: Flow | FlowSpec, name: str | None = None) -> None:
    """Raise ``MissingEnvError`` naming every unplaced step of ``flow`` and the variable it reads
    (``Operator.required_env``) that is unset or empty, before any step runs (a reranker's key, found missing only
    at its step, would come after the retrieval before it). ``name``: what to call the flow (a benchmark's name for
    it), default its spec's name. A language-model step's own pre-run checks come first (``operators.llm.step.
    check_before_run``); last, each server a step's model is on (Ollama, an alias's ``api_base``) must answer
    (``ModelUnreachableError``)."""
    import os

    from operators.extras import check_extras
    from operators.llm.reachable import check_servers_answer
    from operators.llm.step import check_before_run

    built = flow if isinstance(flow, Flow) else flow.build()
    unplaced = [step for step in built.needed_steps() if built.spec.steps[step].placement is None]
    for step in unplaced:  # a model no call could reach, a bad $TESSERA_LLM_THREADS: said now, not at the step
        check_before_run(built.operators[step], step)
        for where, each in built.operators[step].walk(f"steps.{step}"):  # a package of an extra not installed
            check_extras(each, step, f"{where}.op")
    missing = [(step, where, variable) for step in unplaced
               for where, variable in operator_env(built.operators[step]).items() if not os.environ.get(variable)]
    if missing:
        step, where, _ = missing[0]
        named = ", ".join(f"${variable} (step {s}, {w})" for s, w, variable in missing)
        one = len(missing) == 1
        raise MissingEnvError(
            f"flow {name or built.name}: environment variable{'' if one else 's'} {named} "
            f"{'is' if one else 'are'} not set here, so nothing was run: export {'it' if one else 'them'} before the "
            "run", missing, step=step, field=f"steps.{step}.{where}")
    check_servers_answer({step: built.operators[step] for step in unplaced})  # gemma2, no Ollama: each answer failed


def operator_env(op: Operator) -> dict[str, str]:
    """The environment variables ``op`` reads (``Operator.required_env``) and those of the operators it runs inside
    itself (``retrieve.multi_collection``'s postprocessors), keyed by the param that names each, in full
    (``params.postprocess.0.params.api_key_env``): a nested reranker's unset key was found only when it ran."""
    return {f"{prefix}.{where}" if prefix else where: variable
            for prefix, each in op.walk() for where, variable in each.required_env().items()}
