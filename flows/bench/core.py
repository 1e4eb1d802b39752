"""``benchmark(options)``: run every flow once over a dataset's judged queries, evaluate, compare, report.

Order of work: check everything (dataset, flows, baselines, cutoffs, every model the
flows need) before anything runs; then per flow: the run cache, or the index it needs (built on first use) and
one search; then per-query measures (the answer measures too, for a flow that answers),
significance against the baselines, the output files, the report and the MLflow runs.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from flows.bench import answers, indices, metrics, outputs, runs, significance, tracking
from flows.bench.console import BenchReporter
from flows.bench.dataset import SAME_IDS, Dataset, load_dataset, shown_ids
from flows.bench.errors import BenchError, writing_out
from flows.bench.flowdefs import BenchFlow, refuse_no_ranking, resolve_flows, spec_summary
from flows.bench.results import DEFAULT_KS, BenchOptions, BenchResult, FlowRun, check_ks
from flows.cache_code import code_identity
from flows.model_check import HowToMake, check_env, check_models
from operators.errors import TesseraError

__all__ = ["DEFAULT_KS", "BenchOptions", "BenchResult", "FlowRun", "benchmark", "check_ks"]


def benchmark(options: BenchOptions, reporter: BenchReporter | None = None, *,
              how_to_make: HowToMake | None = None) -> BenchResult:
    """Run the benchmark ``options`` describe. Every model its flows need (an index's encoder too) is checked
    first (``flows.model_check``); ``how_to_make`` says how a missing one is made (``flows.train.train_command``)."""
    started = time.perf_counter()
    reporter = reporter or BenchReporter(enabled=False)
    out = _check_out(Path(options.out).expanduser())  # a file given as --out costs nothing
    ks = list(options.ks)  # checked and sorted by BenchOptions
    dataset = load_dataset(options.dataset, split=options.split, limit=options.limit)
    flows = resolve_flows(list(options.flows))
    names = [f.name for f in flows]
    baselines = list(dict.fromkeys(options.baselines or [names[0]]))
    for b in baselines:
        if b not in names:
            raise BenchError(f"--baseline '{b}' is not one of the flows ({', '.join(names)})", field="baseline")
    check_models({f.name: f.spec for f in flows}, how_to_make=how_to_make)  # before any index is built
    for f in flows:  # an unset key (rerank.api's api_key_env, an LLM alias's), before any index is built too
        check_env(f.spec, f.name)
        refuse_no_ranking(f)
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BenchError(f"cannot make --out {out}: {err.strerror or err}", field="out") from None
    try:
        tracker = tracking.open_tracker(options.mlflow_uri, out, dataset.name) if options.mlflow else None
    except BenchError:
        if made:  # a refused --mlflow-uri left an empty --out behind
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    cache = runs.RunCache(out / runs.FOLDER, enabled=options.cache)
    index_root = Path(options.index_dir).expanduser() if options.index_dir else indices.default_root()
    if any(f.spec.unset_index_steps() for f in flows):  # its indices are built there: a bad folder fails now
        _check_index_root(index_root, given=bool(options.index_dir))
    executor = _make_executor(options.executor, options.cache, options.cache_dir)
    qids = dataset.qids
    reporter.log(f"dataset {dataset.root} ({dataset.split}): {len(qids)} judged queries{dataset.unjudged_note()}, "
                 f"{dataset.qrels.num_rows} judgements; cutoffs {', '.join(map(str, ks))}")
    warnings = _dataset_warnings(dataset, options.min_relevance, ks)
    for warning in warnings:
        reporter.warn(warning)

    flow_runs: dict[str, FlowRun] = {}
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    corpus_sha: str | None = None
    warned_indices: set[str] = set()
    with reporter:
        reporter.start(len(flows))
        for flow in flows:
            if corpus_sha is None and flow.spec.unset_index_steps():
                corpus_sha = dataset.corpus_sha256()
            try:
                flow_run = _run_flow(flow, dataset, ks, cache, index_root, corpus_sha, executor, options, reporter)
            except TesseraError as err:  # a step's failure names the step; which of the flows ran it, too (the
                if not isinstance(err, BenchError):  # benchmark's own errors name it in their words)
                    err.flow = err.flow or flow.name
                raise
            flow_runs[flow.name] = flow_run
            for warning in _flow_warnings(flow.name, flow_run, dataset, ks, warned_indices):
                warnings.append(warning)
                reporter.warn(warning)
            per_query[flow.name] = metrics.per_query(flow_run.run.table, dataset.qrels, qids, ks,
                                                     options.min_relevance)
            if flow_run.run.answers and dataset.answers:
                per_query[flow.name].update(answers.per_query(flow_run.run.answers, dataset.answers, qids))

    summaries = {flow: metrics.summarize_all(by_measure) for flow, by_measure in per_query.items()}
    measures = metrics.measure_names(ks) + answers.present(per_query)
    comparisons = significance.compare(per_query, baselines, measures, qids=qids,
                                       test=options.test, correction=options.correction)  # type: ignore[arg-type]
    result = BenchResult(options=options, dataset=dataset, ks=ks, baselines=baselines, flows=flow_runs,
                         per_query=per_query, summaries=summaries, comparisons=comparisons, warnings=warnings)
    result.seconds = time.perf_counter() - started
    from flows.bench import report

    with writing_out(out, "the metrics and the report"):
        result.files.update(outputs.write_all(result, out))
        result.files.update(report.write_report(result, out))
    if tracker is not None:
        where = tracking.log_benchmark(result, tracker)
        if options.mlflow_uri is None and options.out_shown:  # the default store, copied up with the rest
            where = options.shown(out / tracking.STORE_FILE)
        reporter.log(f"MLflow: {len(flows)} run{'' if len(flows) == 1 else 's'} logged to {where}")
    return result


def reads_back(*, cache: bool, default_store: bool) -> tuple[str, ...]:
    """What a benchmark reads from its own ``--out``, so what a remote one must copy down first: the saved runs
    (the run cache) and the default MLflow store, which each benchmark appends to."""
    return tuple(name for name, read in ((runs.FOLDER, cache), (tracking.STORE_FILE, default_store)) if read)


def _dataset_warnings(dataset: Dataset, min_relevance: int, ks: list[int]) -> list[str]:
    """What makes some judged queries count less than a reader would think."""
    qids, warnings = dataset.qids, dataset.warnings()  # ids that match nothing
    # A query whose every judgement is 0 or below scores 0 on nDCG too (no ideal gain): the warning said 'all but
    # nDCG' of it, and such queries lower every mean whatever a flow finds.
    if none := metrics.queries_without_relevant(dataset.qrels, qids, 1):
        warnings.append(f"{len(none)} of {len(qids)} queries have no document judged above 0 (such as "
                        f"{shown_ids(none)}): every measure scores them 0, nDCG too, whatever a flow finds, and "
                        "they are in every mean; judge a relevant document for each, or leave them out of the qrels")
    if min_relevance > 1 and (unmet := metrics.without_relevant(dataset.qrels, qids, min_relevance) - len(none)):
        warnings.append(f"{unmet} of {len(qids)} queries have no document judged {min_relevance} or above: "
                        "the binary measures (all but nDCG) score them 0")
    if dataset.documents and (above := [k for k in ks if k > dataset.documents]):  # P@1000 of 12 documents: 0.0016
        warnings.append(f"cutoff{'s' if len(above) > 1 else ''} {', '.join(map(str, above))} "
                        f"{'are' if len(above) > 1 else 'is'} above the {dataset.documents} documents of "
                        f"{dataset.corpus}: no flow returns that many, and P@k (F1@k with it) divides by k, so P@"
                        f"{above[0]} is at most {dataset.documents / above[0]:.4g}; give --k values up to "
                        f"{dataset.documents}")
    return warnings


def _flow_warnings(name: str, flow_run: FlowRun, dataset: Dataset, ks: list[int], warned_indices: set[str]
                   ) -> list[str]:
    """What makes one flow's measures lower than its search deserves: documents missing from its index (said
    once per index, remembered in ``warned_indices``), no results, too few results, answers with no gold."""
    warnings = []
    if flow_run.index_failures and flow_run.index.key not in warned_indices:
        warned_indices.add(flow_run.index.key)
        warnings.append(f"{flow_run.index_failures} corpus document(s) of {dataset.corpus} failed to ingest "
                        f"and are not in the index {flow_run.index.path} (flow '{name}'): a relevant "
                        f"one among them counts as not found; see {flow_run.index.path / 'failures.jsonl'}")
    if flow_run.run.answers and not flow_run.run.table.num_rows:
        warnings.append(f"flow '{name}' answers without retrieving: its retrieval measures are 0")
    elif flow_run.short_queries:
        warnings.append(f"flow '{name}' returned fewer than {ks[-1]} results for {flow_run.short_queries} of "
                        f"{len(dataset.qids)} queries (fewest: {flow_run.fewest_results}): its k is below "
                        f"{ks[-1]} or it matched fewer documents")
    if degraded := flow_run.run.degraded:
        warnings.append(f"flow '{name}': {len(degraded)} of {len(dataset.qids)} queries degraded (a step fell back, "
                        f"e.g. query {next(iter(degraded))}: {next(iter(degraded.values()))}): its measures are the "
                        "fallback's, and its run is not reused: the next benchmark runs it again")
    if flow_run.run.answers and "answers" not in warned_indices:  # said once, for the first flow that answers
        warned_indices.add("answers")
        warnings.extend(_gold_warnings(name, dataset))
    return warnings


def _gold_warnings(name: str, dataset: Dataset) -> list[str]:
    """The answer measures count only the queries with a gold answer: say which are left out, as the retrieval
    measures' missing ids are (a questions.jsonl of other ids said 'has no questions.jsonl', and one answering half
    the queries gave means over that half without a word)."""
    questions = dataset.root / "questions.jsonl"
    if not questions.is_file():
        return [f"flow '{name}' answers, but {dataset.root} has no questions.jsonl with gold answers: no answer "
                f"measures{answers.held_by_queries(dataset.root / 'queries.jsonl')}"]
    qids = dataset.qids
    without = [q for q in qids if q not in dataset.answers]
    if not without:
        return []
    if len(without) == len(qids):
        return [f"flow '{name}' answers, but {questions} has no gold answer for any of the {len(qids)} queries "
                f"benchmarked (such as {shown_ids(without)}): no answer measures; {SAME_IDS}"]
    return [f"{len(without)} of the {len(qids)} queries benchmarked have no gold answer in {questions} (such as "
            f"{shown_ids(without)}; a null or blank answer is none): the answer measures (AnswerEM, AnswerF1) are over "
            f"the other {len(qids) - len(without)}"]


def _refuse_empty_index(flow: str, index: Path, failed: int) -> None:
    """Every document of the corpus failed to ingest (all empty, say): each query would score 0, and the table of
    zeros looked like a result."""
    from operators.store import Index

    if failed and len(Index.open(index, verify=False)) == 0:
        raise BenchError(f"flow '{flow}': no document of the corpus could be indexed ({failed} failed, each with "
                         f"why in {index / 'failures.jsonl'}), so every query would score 0", field="dataset")


def _export_query_encoder(plan: indices.IndexPlan | None) -> None:
    """The torch-free query encoder's export for a dense index, made before a flow's timer starts, as tessera
    ingest's last step makes it: the first dense flow counted it (115 s, where hybrid's same dense step took 0.8 s)."""
    if plan is not None and plan.dense:
        from operators.models.onnx_query_encoder import export_after_ingest

        export_after_ingest(plan.path)


def _run_flow(flow: BenchFlow, dataset: Dataset, ks: list[int], cache: runs.RunCache, index_root: Path,
              corpus_sha: str | None, executor, options: BenchOptions, reporter: BenchReporter) -> FlowRun:
    # a step that reads the dataset itself (retrieve.gold) and leaves it unset reads the benchmark's
    flow_spec = flow.spec.with_unset("dataset", str(dataset.root.resolve()), split=dataset.split)
    plan = indices.plan_index(flow_spec, corpus_sha, index_root) if corpus_sha else None
    built_now, failed = False, 0
    keyed, spec = flow_spec, flow_spec
    if plan is not None:  # the index is part of the run's identity: built (or found) first
        built_now = indices.ensure_index(plan, dataset.corpus, executor=options.executor, log=reporter.log,
                                         progress=reporter.enabled)
        _check_trec_ids(flow.name, plan.path)  # the run becomes OUT/runs/*.trec: refused now, not after the run
        failed = indices.failed_documents(plan)
        _refuse_empty_index(flow.name, plan.path, failed)
        keyed = flow_spec.with_index(indices.identity(plan))
        spec = flow_spec.with_index(str(plan.path))
    spec_json = canonical_spec(keyed)
    key = runs.run_key(spec_json, dataset.queries_fingerprint(), dataset.qrels_fingerprint(), ks[-1])
    stored = cache.load(flow.name, key)
    if stored is not None:
        reporter.flow_finished(flow.name, f"cached run {stored.path.name} (ran in {stored.seconds:.1f} s)")
    else:
        built = spec.build()
        _ask_the_step_cache_again(executor)
        executor.start(warm=True)  # Ray's start and its workers' (the first flow run on Ray) are not the flow's time
        _export_query_encoder(plan)  # nor the query encoder's one-off export
        reporter.flow_started(flow.name, len(built.needed_steps()))
        start = time.perf_counter()
        result = executor.run(built, dataset.queries, progress=reporter)
        seconds = time.perf_counter() - start
        found = answers.flow_answers(result.metadata)
        table = runs.to_run(flow.name, result.table, answered=bool(found))
        hits = result.cache_hit_ratio
        degraded = {str(qid): str(meta["degraded"].get("reason", meta["degraded"])) for qid, meta in
                    result.metadata.items() if isinstance(meta, dict) and isinstance(meta.get("degraded"), dict)}
        with writing_out(cache.root.parent, f"the run of flow '{flow.name}'"):
            stored = cache.save(flow.name, key, table, seconds, spec_json, found, hits, degraded,
                                result.uncached_steps, result.nothing_stored)
        reporter.flow_finished(flow.name, f"ran in {seconds:.1f} s{stored.from_step_cache}, {table.num_rows} "
                                          f"results -> {options.shown(stored.path)}")
    with writing_out(cache.root.parent, f"the TREC run of flow '{flow.name}'"):
        stored.write_trec()  # a cached run from before .trec files were written gets one too
    short, fewest = runs.depth_shortfall(stored.table, dataset.qids, ks[-1])
    return FlowRun(name=flow.name, source=flow.source, key=key, run=stored, index=plan, index_built=built_now,
                   short_queries=short, fewest_results=fewest, spec=spec_json,
                   summary=spec_summary(flow.spec), index_failures=failed)


def _check_trec_ids(flow: str, index: Path) -> None:
    """Refuse an index holding a live document id that a TREC run cannot hold (empty or with whitespace: one
    added to a built index by ``tessera index add``; the corpus's own ids are checked when the dataset is read),
    naming the flow, the index and the id, before the flow runs: its run was written as a TREC file after it."""
    from flows.trec_run import check_index_ids
    from operators.errors import SpecError

    try:
        check_index_ids([str(index)], f"; tessera bench writes each flow's run as OUT/{runs.FOLDER}/*.trec: delete "
                                      "that document from the index (tessera index delete), or delete the index "
                                      "so the benchmark builds it from the corpus again")
    except SpecError as err:
        raise BenchError(f"flow '{flow}': {err.message}", field="flow") from None


def canonical_spec(spec) -> dict[str, Any]:
    """What decides a flow's output: per needed step, the operator, its version, inputs, identity and code.

    The identity is the operator's ``cache_identity()`` (params with defaults filled
    in, plus e.g. a corpus file's content hash); a step that reads an index gets its
    params only, where an injected index is ``auto:<key>/g<generation>`` (a content
    address and the build), not its path.
    """
    flow = spec.build()
    steps = {}
    for step in flow.needed_steps():
        op = flow.operators[step]
        takes_index = "index" in getattr(type(op).Params, "model_fields", {})
        identity = op.params.model_dump(mode="json") if takes_index else op.cache_identity()
        # the code that computes it: an upgrade, or an edited operator (built-in or plugin), is another flow
        steps[step] = {"op": op.name, "version": op.version, "inputs": list(flow.inputs[step]),
                       "identity": identity, "code": code_identity(op)}
    return {"steps": steps, "output": flow.output}


def _ask_the_step_cache_again(executor) -> None:
    """Ask again, for each flow that runs, whether the step cache can be written (``StepCache.ask_again``)."""
    if (step_cache := getattr(executor, "cache", None)) is not None:
        step_cache.ask_again()


def _make_executor(kind: str, use_cache: bool, cache_dir: str | Path | None):
    """The executor, with the step cache in ``cache_dir`` (default ``$TESSERA_HOME/cache``) unless ``use_cache`` is
    off; a cache that cannot be opened (a file given as --cache-dir, a bad $TESSERA_HOME) fails here, before any
    index is built. The folder is made absolute: Ray workers open it by path."""
    from flows.cache import StepCache
    from flows.executors import make_executor

    cache = StepCache(Path(cache_dir).expanduser().absolute() if cache_dir else None) if use_cache else None
    if cache is not None:
        cache.check()
    return make_executor(kind, cache=cache, keep_history=False)


def _check_index_root(root: Path, given: bool) -> None:
    """The folder of the benchmark's own indices can be made (``--index-dir``, else under ``$TESSERA_HOME``)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        where = f"--index-dir {root}" if given else f"the benchmark's index folder {root} (under $TESSERA_HOME)"
        raise BenchError(f"cannot make {where}: {err.strerror or err}; give --index-dir a folder",
                         field="index-dir") from None


def _check_out(out: Path) -> Path:
    """``--out`` is a folder, or can be one: neither it nor a folder above it is a file."""
    try:
        blocking = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    except OSError as err:  # a name too long, a loop of links
        raise BenchError(f"--out {out}: {err.strerror or err}", field="out") from None
    if blocking is not None:
        what = "is a file" if blocking == out else f"cannot be made: {blocking} is a file"
        raise BenchError(f"--out {out} {what}; give a folder for the report, metrics and runs", field="out")
    return out
