"""The time left that ``tessera run``, ``ingest`` and ``train`` print off a terminal, worded by one function:
the units still to do at the pace of those done so far, to the second."""

from __future__ import annotations

import pytest

from flows.progress import time_left


@pytest.mark.parametrize(("seconds", "done", "remaining", "said"), [
    (10.0, 4, 6, "about 0:00:15 left"),  # 2.5 s a unit
    (10.0, 3, 1, "about 0:00:03 left"),  # 3.33 s, to the second
    (60.0, 1, 90, "about 1:30:00 left"),
    (0.5, 1000, 0, "about 0:00:00 left"),
])
def test_the_time_left_is_the_units_remaining_at_the_pace_so_far(seconds, done, remaining, said):
    assert time_left(seconds, done, remaining) == said
