"""Training's progress off a terminal (a file, a Ray job's log): lines, not a bar's carriage-return redraws, which
piled up on one physical line of the log."""

from __future__ import annotations

from flows.train import step_bar as module
from flows.train.step_bar import step_bar


def test_off_a_terminal_the_steps_are_lines_now_and_then_and_at_the_end(capsys, monkeypatch):
    bar = step_bar(3, "train cross-encoder", progress=True)  # pytest's stderr is not a terminal
    for loss in ("0.9", "0.7", "0.5"):  # as the training loops go: the step's loss, then the step
        bar.set_postfix(loss=loss, refresh=False)
        bar.update(1)
    bar.close()
    assert capsys.readouterr().err == "train cross-encoder: step 3/3, loss 0.5\n"  # within LINE_SECONDS: one line

    monkeypatch.setattr(module, "LINE_SECONDS", 0.0)
    bar = step_bar(2, "train colbert", progress=True)
    bar.update(1)
    bar.set_postfix(loss="0.4", refresh=False)
    bar.update(1)
    bar.close()
    err = capsys.readouterr().err
    assert err == "train colbert: step 1/2\ntrain colbert: step 2/2, loss 0.4\n" and "\r" not in err


def test_without_progress_nothing_is_written(capsys):
    bar = step_bar(2, "train", progress=False)
    bar.update(2)
    bar.close()
    assert capsys.readouterr().err == ""


def test_off_a_terminal_a_line_says_the_time_left_at_the_pace_so_far(capsys, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(module, "LINE_SECONDS", 1000.0)
    bar = step_bar(5, "cross-encoder", progress=True)
    for at in (100.0, 110.0, 120.0):  # a slow first step (the model's warm-up), then 10 s each
        now[0] = at
        bar.update(1)
    bar.close()
    assert capsys.readouterr().err == "cross-encoder: step 3/5, about 0:00:20 left\n"  # 2 steps left at 10 s each
