"""Executors run a validated flow over a queries table and return a ``FlowResult``.

``make_executor(kind, **options)`` is the one way the CLI, the benchmarker, training's
mining and the service build one::

    executor = make_executor("ray", cache=StepCache(path), keep_history=False)
    result = executor.run(flow, queries, progress=callback, cancel=token)

Kinds: ``local`` (in-process, the online path; ``flows.executors.local``) and ``ray``
(Ray Data stages, the batch path; ``flows.executors.ray_data``). Both give the same
table, step records and history for the same flow and input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Protocol, runtime_checkable

from operators.errors import SpecError

if TYPE_CHECKING:
    import pyarrow as pa

    from flows.cache import StepCache
    from flows.progress import CancelToken, ProgressCallback
    from flows.result import FlowResult
    from flows.spec import Flow, FlowSpec

#: The kinds ``make_executor`` knows.
KINDS = ("local", "ray")


@runtime_checkable
class Executor(Protocol):
    """What every executor offers: a name, ``start`` and ``run``."""

    name: str

    def start(self) -> None:
        """Start what the executor runs on (Ray for ``ray``; nothing for ``local``) before the first ``run``, so a
        caller that times runs (``tessera bench``) does not count it in the first."""
        ...

    def run(self, flow: "Flow | FlowSpec | str", queries: "pa.Table | str | Iterable[str] | None" = None, *,
            progress: "ProgressCallback | None" = None, cancel: "CancelToken | None" = None) -> "FlowResult":
        """Run ``flow`` over ``queries`` (a ``qid, query`` table, one text or a list of texts)."""
        ...


def make_executor(kind: str = "local", *, cache: "StepCache | None" = None, keep_history: bool = True,
                  **options: Any) -> Executor:
    """An executor of ``kind`` with a step cache (None: no caching) and history on or off.

    ``options`` go to the executor's constructor (``ray_init_kwargs`` for ``ray``); an
    unknown kind or option is a ``SpecError`` naming it.
    """
    if kind == "local":
        from flows.executors.local import LocalExecutor as executor_class
    elif kind == "ray":
        try:
            from flows.executors.ray_data import RayDataExecutor as executor_class
        except ImportError as err:
            raise SpecError(f"the Ray executor is not available: {err}", field="executor") from None
    else:
        raise SpecError(f"unknown executor '{kind}'; choose one of {', '.join(KINDS)}", field="executor")
    try:
        return executor_class(cache=cache, keep_history=keep_history, **options)
    except TypeError as err:
        raise SpecError(f"executor '{kind}': {err}", field="executor") from None
