"""What a benchmark is asked to do and what it found: the records ``core`` fills and the writers read."""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from flows.bench import answers, indices, metrics, runs, significance
from flows.bench.dataset import Dataset
from flows.bench.errors import BenchError

DEFAULT_KS = (1, 3, 5, 10, 100)


def check_ks(ks: Any) -> list[int]:
    """The cutoffs, sorted and each once; an empty list, one below 1, or one that is no whole number (10.5 was cut to
    10, the text "10" read as the cutoffs 1 and 0) is refused, naming the value as given."""
    whole = isinstance(ks, (list, tuple)) and all(isinstance(k, int) and not isinstance(k, bool) for k in ks)
    if not whole or not ks or any(k <= 0 for k in ks):
        raise BenchError(f"bad --k value {ks!r}: give positive whole cutoffs, e.g. [1, 3, 5, 10, 100]", field="k")
    return sorted(set(ks))


def check_names(values: Any, option: str, *, empty_ok: bool = False) -> list[str]:
    """``flows`` or ``baselines``: a list of texts. A text alone was read letter by letter (``flows="bm25"`` looked
    for the flows 'b', 'm', '2' and '5'), and a number failed as Python's ``AttributeError``."""
    if isinstance(values, (str, bytes)):
        raise BenchError(f"bad --{option} value {values!r}: give a list of them, [{values!r}]", field=option)
    if not isinstance(values, (list, tuple)) or (not values and not empty_ok):
        raise BenchError(f"bad --{option} value {values!r}: give a list of NAME=SPEC texts (or flows' names)",
                         field=option)
    for value in values:
        if not isinstance(value, str):
            raise BenchError(f"bad --{option} value {values!r}: give NAME=SPEC texts (or flows' names), not "
                             f"{type(value).__name__} {value!r}", field=option)
    return list(values)


def check_path(value: Any, option: str) -> None:
    """``dataset`` or ``out``: a folder's path as text or a ``Path``; ``None`` failed as Python's ``TypeError``."""
    if not isinstance(value, (str, PathLike)) or not str(value).strip():
        raise BenchError(f"bad --{option} {value!r}: give a folder's path", field=option)


@dataclass
class BenchOptions:
    """A benchmark's arguments, checked when made: a bad value is refused before any dataset is read."""

    dataset: str | Path
    flows: list[str]  # NAME=SPEC values
    out: str | Path
    split: str = "test"
    ks: list[int] = field(default_factory=lambda: list(DEFAULT_KS))
    baselines: list[str] | None = None  # default: the first flow
    test: str = "t"
    correction: str = "holm"
    executor: str = "local"
    limit: int | None = None
    min_relevance: int = 1  # binary measures: a document is relevant at this grade or above
    index_dir: str | Path | None = None
    cache: bool = True  # run cache and step cache
    cache_dir: str | Path | None = None  # the step cache's folder (default $TESSERA_HOME/cache)
    mlflow: bool = True
    mlflow_uri: str | None = None  # default: sqlite:///<out>/mlflow.db
    #: ``--out`` as given when ``out`` is its local copy (a remote URI): the paths the outputs name are under it.
    out_shown: str | None = None

    def __post_init__(self) -> None:
        check_path(self.dataset, "dataset")
        check_path(self.out, "out")
        if not self.flows:
            raise BenchError("give at least one --flow NAME=SPEC", field="flow")
        self.flows = check_names(self.flows, "flow")
        if self.baselines is not None:
            self.baselines = check_names(self.baselines, "baseline", empty_ok=True)
        split = self.split
        if not isinstance(split, str) or not split.strip() or "/" in split or "\\" in split:
            # None read qrels/None.tsv; '../x' a file outside the dataset's qrels/
            raise BenchError(f"bad --split {split!r}: give a split's name, as qrels/SPLIT.tsv names it (test, dev)",
                             field="split")
        self.ks = check_ks(self.ks)
        if self.test not in significance.TESTS:
            raise BenchError(f"unknown test '{self.test}' (use {' or '.join(significance.TESTS)})", field="test")
        if self.correction not in significance.CORRECTIONS:
            raise BenchError(f"unknown correction '{self.correction}' (use one of "
                             f"{', '.join(significance.CORRECTIONS)})", field="correction")
        limit = self.limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
            # (a text '5' failed as Python's TypeError, True was one query)
            raise BenchError(f"bad --limit {limit!r}: give a positive number of queries", field="limit")
        grade = self.min_relevance
        if isinstance(grade, bool) or not isinstance(grade, int) or grade < 1:
            raise BenchError(f"bad --min-relevance {grade!r}: give a grade of 1 or more", field="min-relevance")

    def shown(self, path: str | Path) -> str:
        """A path under ``out`` as the user knows it: under ``out_shown`` (``s3://bucket/out/runs/...``) when
        ``out`` is a remote output's local copy, which is gone once the benchmark ends."""
        text, local = str(path), str(Path(self.out).expanduser())
        if self.out_shown is None or not text.startswith(local):
            return text
        return self.out_shown.rstrip("/") + text[len(local):]


@dataclass
class FlowRun:
    name: str
    source: str
    key: str
    run: runs.StoredRun
    index: indices.IndexPlan | None
    index_built: bool
    short_queries: int
    fewest_results: int
    spec: dict[str, Any]  # canonical: what the run key hashes
    summary: str  # one line: steps, operators, params
    index_failures: int = 0  # corpus documents that failed to ingest into its index (not in it)


@dataclass
class BenchResult:
    options: BenchOptions
    dataset: Dataset
    ks: list[int]
    baselines: list[str]
    flows: dict[str, FlowRun]
    per_query: dict[str, dict[str, dict[str, float]]]  # flow -> measure -> qid -> value
    summaries: dict[str, dict[str, metrics.Summary]]  # flow -> measure -> summary
    comparisons: list[significance.Comparison]
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def measures(self) -> list[str]:
        """The retrieval measures, then the answer measures that some flow has."""
        return metrics.measure_names(self.ks) + answers.present(self.per_query)

    def metrics_dict(self) -> dict[str, dict[str, float]]:
        return {f: {m: s.mean for m, s in by_measure.items()} for f, by_measure in self.summaries.items()}
