"""``max_steps`` (``tessera train --max-steps``) stops a schedule early; more than the schedule's epochs hold is said
in a warning naming both figures, and the schedule stops at its epochs: ``--max-steps 5000`` over 300 steps stopped
at 300 without a word, as if it had trained 5000."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from flows.train._loop import total_steps

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample" / "corpus.jsonl"


def test_a_cap_within_the_schedule_stops_it_quietly_and_one_beyond_is_said(caplog):
    with caplog.at_level(logging.WARNING, logger="tessera.train"):
        assert total_steps(10, 4, 2, None, "cross-encoder") == 6  # 3 steps an epoch (the last batch of 2)
        assert total_steps(10, 4, 2, 5, "cross-encoder") == 5
        assert total_steps(10, 4, 2, 6, "cross-encoder") == 6
        assert caplog.messages == []
        assert total_steps(10, 4, 2, 5000, "cross-encoder") == 6
    assert caplog.messages == ["cross-encoder: max_steps=5000 is more than its 2 epoch(s) of 3 step(s) (10 examples, "
                               "batches of 4): it stops after 6 steps; give more epochs to train longer"]


@pytest.mark.integration  # a ColBERT model trains in this process (MiniLM, two steps)
def test_colbert_trains_its_epochs_and_says_the_cap_was_beyond_them(tmp_path, caplog):
    from flows.train.colbert import train_colbert

    docs = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:4]]
    examples = [{"query": d["title"], "positive": d["text"], "negatives": [docs[(i + 1) % 4]["text"]]}
                for i, d in enumerate(docs)]
    with caplog.at_level(logging.WARNING, logger="tessera.train"):
        path = train_colbert(examples, output_dir=tmp_path / "colbert", batch_size=2, epochs=1, max_steps=50,
                             doc_maxlen=32, progress=False)
    assert len(json.loads((path / "training.json").read_text(encoding="utf-8"))["losses"]) == 2
    assert [m for m in caplog.messages if "max_steps" in m] == [
        "colbert: max_steps=50 is more than its 1 epoch(s) of 2 step(s) (4 examples, batches of 2): it stops after "
        "2 steps; give more epochs to train longer"]


@pytest.mark.integration  # a torch module trains (one weight: the loop is what is checked)
def test_every_epoch_trains_all_its_examples_when_batches_cannot_repeat_a_query():
    """A batch holds a query once, so 40 examples of 20 queries (two positives each) make 5 or 6 batches of 8 an
    epoch: the schedule counted 5 (40 / 8), and the second of ``--epochs 2`` was cut short without a word."""
    import random
    from types import SimpleNamespace

    import torch

    from flows.train._loop import batches, fit

    examples = [{"query": f"q{i // 2}", "positive": f"p{i}", "negatives": ["n"]} for i in range(40)]
    params = SimpleNamespace(batch_size=8, epochs=2, negatives=1, lr=0.01, weight_decay=0.0, warmup_ratio=0.1)
    rng = random.Random(5)
    drawn = [len(batches(examples, 8, rng)) for _ in range(2)]
    assert sum(drawn) > 10, drawn  # the seed is one where the batches are more than 40 / 8 an epoch
    model, seen = torch.nn.Linear(1, 1), []

    def loss_of(columns):
        seen.extend(columns[1])
        return (model(torch.ones(len(columns[0]), 1)) ** 2).mean()

    losses = fit(model, loss_of, examples, model.parameters(), params, seed=5, max_steps=None, desc="test",
                 progress=False)
    assert len(losses) == sum(drawn) and sorted(seen) == sorted(e["positive"] for e in examples * 2)
