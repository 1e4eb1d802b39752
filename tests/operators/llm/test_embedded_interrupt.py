"""Stopping the embedded model inside its prompt evaluation (one llama.cpp call, seconds long on a small CPU).

It used to run to its end first: a cancel was checked between generated tokens only, and a Ctrl-C waited for the
C call to return. Now llama.cpp's abort callback stops it. ``llama.n_tokens`` tells where it stopped: 0 after the
call began (each call starts from ``reset``) means the prompt was never evaluated to its end. The model stays
usable: the next call gives the answer it gave before.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from operators.errors import FlowCancelled
from operators.interrupt import interruptible
from operators.llm import LLMError, complete
from operators.llm.embedded_model import load

pytestmark = pytest.mark.slow  # loads the embedded model and evaluates long prompts

#: About 3,000 tokens: a prompt evaluation of seconds, not the one token a stop might slip past.
LONG = "Summarise this: " + "the cat sat on the mat and looked at the dog. " * 250
QUESTION = "What do bees make? Answer in one word."


def _when_the_call_begins(llama, act) -> threading.Thread:
    """``act()`` as soon as the embedded model's next call holds it (its abort callback watches that call)."""
    def watch() -> None:
        deadline = time.monotonic() + 300
        while llama.tessera_stop is None and time.monotonic() < deadline:
            time.sleep(0.002)
        act()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def model():
    """The loaded model and the answer it gives to ``QUESTION`` when nothing was stopped."""
    answer = complete(QUESTION, model="local", max_tokens=8).text
    llama, _ = load("smollm2-135m-instruct")
    return llama, answer


def test_a_cancel_aborts_the_prompt_evaluation_and_the_model_answers_as_before(model):
    llama, answer = model
    stop = threading.Event()  # a flow's cancel, as the executors check it

    def check() -> None:
        if stop.is_set():
            raise FlowCancelled("stopped by the test")

    _when_the_call_begins(llama, stop.set)
    with interruptible(check), pytest.raises(FlowCancelled, match="stopped by the test"):
        complete(LONG, model="local", max_tokens=8)
    assert llama.n_tokens == 0  # aborted inside the prompt's evaluation
    assert llama.tessera_stop is None  # the call let go of the abort callback
    assert complete(QUESTION, model="local", max_tokens=8).text == answer


def test_a_keyboard_interrupt_aborts_the_prompt_evaluation_streamed_too(model):
    """Ctrl-C (SIGINT to this process, Python's default handler as in a terminal) while the caller waits."""
    llama, answer = model
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for on_text in (None, [].append):
            _when_the_call_begins(llama, lambda: os.kill(os.getpid(), signal.SIGINT))
            with pytest.raises(KeyboardInterrupt):
                complete(LONG, model="local", max_tokens=8, on_text=on_text)
                time.sleep(60)  # (only if the call ended first: the signal lands here, and the assert says so)
            assert llama.n_tokens == 0
    finally:
        signal.signal(signal.SIGINT, previous)
    pieces: list[str] = []
    assert complete(QUESTION, model="local", max_tokens=8, on_text=pieces.append).text == answer == "".join(pieces)


def test_a_timeout_inside_the_prompt_evaluation_is_a_timeout(model):
    llama, answer = model
    with pytest.raises(LLMError) as err:
        complete(LONG, model="local", max_tokens=8, timeout=0.3, num_retries=0)
    assert err.value.kind == "timeout" and llama.n_tokens == 0
    assert complete(QUESTION, model="local", max_tokens=8).text == answer
