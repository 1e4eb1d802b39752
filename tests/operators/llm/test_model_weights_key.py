"""An embedded model's step cache key holds its .gguf file's content: a file re-quantised or retrained at the same
path replayed the old model's cached answers (the key held the path alone)."""

from __future__ import annotations

import os
import shutil

import pytest

from flows.cache_keys import step_key
from operators.llm.embedded_model import gguf_path
from operators.registry import create


def answer_key(model: str) -> str:
    return step_key(create("generate.answer", {"model": model, "context_column": None}, step_id="answer"))


def test_the_key_follows_the_gguf_files_bytes_not_its_path_or_time(tmp_path, monkeypatch):
    try:
        packaged = gguf_path("smollm2-135m-instruct")
    except Exception as err:  # noqa: BLE001 - the package's absence, as the model check words it
        pytest.skip(f"the embedded model is not installed: {err}")
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    copy = tmp_path / "m.gguf"
    shutil.copyfile(packaged, copy)
    before = answer_key(f"tessera/{copy}")
    os.utime(copy, ns=(1, 1))  # copied again or touched: the same weights
    assert answer_key(f"tessera/{copy}") == before
    with open(copy, "r+b") as f:  # other weights under the same name and size
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    assert answer_key(f"tessera/{copy}") != before
