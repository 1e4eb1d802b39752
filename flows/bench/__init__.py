"""The benchmarker: named flows × a BEIR-layout dataset -> measures, significance, a report.

::

    tessera bench --dataset DIR --flow bm25=bm25 --flow dense=dense --out OUT
    python -m flows.bench ...   # the same, as a job entry point

Modules, one concern each: ``dataset`` (BEIR folder, judged queries, qrels),
``flowdefs`` (``--flow NAME=SPEC``), ``indices`` (indices built from the corpus and
injected into steps that need one), ``runs`` (one search per flow, cached by
content), ``metrics`` (ir-measures per query, CIs), ``significance`` (paired tests,
correction without the baseline), ``outputs``/``report``/``tracking`` (files, report
with plots, MLflow), ``results`` (options and results), ``core`` (``benchmark(options)``).
The command line is ``flows.commands.bench``.
"""

from typing import Any

__all__ = ["BenchError", "BenchOptions", "BenchResult", "benchmark"]


def __getattr__(name: str) -> Any:  # lazy: `tessera --help` does not import the benchmarker
    if name == "BenchError":
        from flows.bench.errors import BenchError

        return BenchError
    if name in __all__:
        from flows.bench import core

        return getattr(core, name)
    raise AttributeError(name)
