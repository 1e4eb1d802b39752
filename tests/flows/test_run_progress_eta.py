"""How far a batch run is: every progress event of a step that reads the queries carries the rows it has taken
and its total, so ``tessera run`` shows the current step's rows in with the time left on a terminal, and in a log
(not a terminal) a line every ``HEARTBEAT_S`` while a long step runs. Before, 10,000 queries through one step
showed '0/1 steps' on a terminal and nothing in a log until the step ended. A real BM25 run (``retrieve.corpus_bm25``
over the sample corpus: no model) in batches of 8 queries."""

from __future__ import annotations

import yaml

from flows.commands._progress import ProgressReporter
from tests.flows.test_cli_scripting import CORPUS

SPEC = f"""name: tiny
steps:
  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {CORPUS}, k: 3}}, batch_size: 8}}
  top: {{op: postprocess.reduce, params: {{k: 1}}}}
"""


def run_with(progress) -> None:
    from flows.api import Flow

    Flow.load(yaml.safe_load(SPEC)).run([f"honey bees {i}" for i in range(40)], progress=progress)


def test_a_step_says_how_many_of_its_input_rows_it_has_taken():
    events = []
    run_with(events.append)
    bm25 = [(e.step_rows_in, e.step_rows_total) for e in events if e.step == "bm25"]
    assert {total for _, total in bm25} == {40}
    taken = [rows_in for rows_in, _ in bm25]
    assert taken == sorted(taken) and 0 < taken[1] < 40 and taken[-1] == 40  # batch by batch
    top = [(e.step_rows_in, e.step_rows_total) for e in events if e.step == "top"]
    assert top[-1] == (40 * 3, 40 * 3)  # the rows bm25 gave it


def test_a_log_gets_a_line_on_a_long_step_with_the_time_left(capsys):
    reporter = ProgressReporter(enabled=True, flow="tiny")
    reporter.live = False  # as in a log
    reporter.HEARTBEAT_S = 0.0  # every batch is 'long'
    with reporter:
        run_with(reporter)
    lines = capsys.readouterr().err.splitlines()
    running = [line for line in lines if line.startswith("[1/2] bm25 (retrieve.corpus_bm25) running: ")]  # its place
    assert running and "/40 rows in, about 0:00:" in running[-1], lines
    assert "[1/2] bm25 (retrieve.corpus_bm25) done, 120 rows" in lines


def test_a_log_gets_a_line_while_one_long_batch_runs(capsys):
    """An LLM step takes a few queries in one batch and calls the model for minutes: events come only between
    batches, so before, a log said nothing until the step ended (then 'about 0:00:00 left')."""
    import time

    from flows.progress import ProgressEvent

    reporter = ProgressReporter(enabled=True, flow="tiny")
    reporter.live = False
    reporter.HEARTBEAT_S = 0.1
    with reporter:
        reporter(ProgressEvent(flow="tiny", step="summary", op="summarize.results", steps_done=0, steps_total=1,
                               rows_done=0, step_rows_total=3))
        time.sleep(0.5)  # the batch under way: no event
        during = capsys.readouterr().err.splitlines()
        reporter(ProgressEvent(flow="tiny", step="summary", op="summarize.results", steps_done=1, steps_total=1,
                               rows_done=3, step_rows_done=3, step_rows_in=3, step_rows_total=3))
        time.sleep(0.3)  # the step is done: no more lines for it
    after = capsys.readouterr().err.splitlines()
    assert any(line.startswith("[1/1] summary (summarize.results) running: 0/3 rows in, 0:00:0") and
               line.endswith(" so far") for line in during), during
    # a running line may still come between reading the log and the step's end, but none after it
    assert after[-1] == "[1/1] summary (summarize.results) done, 3 rows", after
    assert all(" running: 0/3 rows in, " in line for line in after[:-1]), after
