"""What the libraries Tessera trains with print, kept off the terminal of ``tessera train --quiet``."""

from __future__ import annotations

import contextlib
from typing import Iterator

from flows.progress import redraws

#: Libraries whose loggers write notes to the terminal while a model loads or trains: sentence-transformers'
#: "Converting SentenceTransformer model ... to CrossEncoder" and transformers' "LOAD REPORT" of the new
#: classification head (through transformers' own handler), both logged as warnings although nothing is wrong.
NOTING_LIBRARIES = ("transformers", "sentence_transformers", "huggingface_hub", "model2vec")


@contextlib.contextmanager
def quiet_libraries(quiet: bool) -> Iterator[None]:
    """With ``quiet``, the libraries Tessera trains with show no progress bar (transformers' and huggingface_hub's
    "Loading weights", "Writing model shards") and log errors only, not their notes (``NOTING_LIBRARIES``);
    everything is as it was afterwards. Off a terminal (a file, a job's log) their bars are hidden too: a bar's
    redraws are no lines to read there (Tessera's own progress writes lines, ``step_bar``)."""
    bars_only = not quiet and not redraws()
    if not quiet and not bars_only:
        yield
        return
    import logging

    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as hf_logging

    shown, hub_hidden = hf_logging.is_progress_bar_enabled(), hub_utils.are_progress_bars_disabled()
    hf_logging.get_verbosity()  # sets transformers' logger up now: later, that would reset the level set here
    levels = {name: logging.getLogger(name).level for name in NOTING_LIBRARIES}
    hf_logging.disable_progress_bar()
    for name in () if bars_only else NOTING_LIBRARIES:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if shown:
            hf_logging.enable_progress_bar()  # the hub's bars too
        (hub_utils.disable_progress_bars if hub_hidden else hub_utils.enable_progress_bars)()
