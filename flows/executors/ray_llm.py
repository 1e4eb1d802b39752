"""Which engine an LLM step runs on under the Ray Data executor, and the GPU path (``ray.data.llm``).

* **Default (CPU, or any model behind an API)**: the step is a ``map_batches`` stage on
  a fixed actor pool (``LLMStep.concurrency`` actors, 2 unless the spec says otherwise);
  each actor sends its calls through the gateway (litellm), ``params.concurrency`` at a
  time. A model server therefore sees at most actors x ``params.concurrency`` calls,
  whatever the cluster's size. The embedded model loads once per actor.
* **GPU with vLLM installed** (the ``gpu`` extra), a row-wise LLM step
  (``operators.llm.rowwise``) that asks for GPUs, and a model alias with a
  ``model_source``: Ray's own batch path, ``ray.data.llm``'s vLLM engine processor, which
  keeps the model on the GPU actors and batches continuously. The operator's ``messages``
  is its preprocess and its ``apply`` finishes each row (``row_functions``), the same two
  functions its gateway path uses, so both write the same columns from the same replies.

``llm_engine`` decides; it imports nothing heavy, so the choice is tested anywhere.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

from operators.base import Operator

#: Per row on the processor path: the input's column names (what ``finish`` keeps) and whether it was sent.
COLUMNS, SENT = "__tessera_columns", "__tessera_sent"


def llm_engine(op: Operator, num_gpus: float, *, vllm_installed: bool | None = None) -> str:
    """``"vllm"`` for a row-wise LLM step given GPUs whose model has a ``model_source``, where vLLM is installed
    (``vllm_installed``: None looks); else ``"gateway"``."""
    from operators.llm.aliases import ModelConfigError, resolve
    from operators.llm.rowwise import RowwiseLLMStep

    if not isinstance(op, RowwiseLLMStep) or num_gpus <= 0:
        return "gateway"
    if vllm_installed is None:
        vllm_installed = importlib.util.find_spec("vllm") is not None
    try:
        source = resolve(op.params.model).model_source
    except ModelConfigError:
        return "gateway"  # the gateway path names the bad alias
    return "vllm" if vllm_installed and source else "gateway"


def row_functions(op: Operator) -> tuple[Callable[[dict], dict], Callable[[dict], dict]]:
    """``(preprocess, finish)`` for ``ray.data.llm``: a row with the operator's chat ``messages`` and sampling
    params, and a processed row back to the input's columns plus the operator's outputs (``apply`` of the
    engine's ``generated_text``, or of the row's ``__inference_error__``)."""
    from operators.llm.gateway import Completion, LLMError

    p = op.params
    sampling = {"temperature": p.temperature, "max_tokens": p.max_tokens,
                **({} if getattr(p, "seed", None) is None else {"seed": p.seed})}  # vLLM's SamplingParams take it
    op_class, params, step_id = type(op), p.model_dump(), op.step_id
    built: list[Operator] = []  # the operator, rebuilt once where the functions run (only its params travel)

    def the_op() -> Any:
        if not built:
            built.append(op_class(params, step_id=step_id))
        return built[0]

    def preprocess(row: dict[str, Any]) -> dict[str, Any]:
        messages = the_op().messages(row)
        return {**row, COLUMNS: list(row), SENT: messages is not None,  # an unsent row asks for one token
                "messages": messages or [{"role": "user", "content": "-"}],
                "sampling_params": sampling if messages is not None else {**sampling, "max_tokens": 1}}

    def finish(row: dict[str, Any]) -> dict[str, Any]:
        reply = None
        if row.get(SENT):
            error = row.get("__inference_error__") or ""
            written = int(row.get("num_generated_tokens") or 0)
            reply = LLMError(error, kind="api") if error else Completion(
                text=row.get("generated_text") or "", model=p.model,
                prompt_tokens=int(row.get("num_input_tokens") or 0), completion_tokens=written,
                finish_reason="length" if written >= p.max_tokens else "stop")  # vLLM's row has no finish reason
        kept = {c: row.get(c) for c in row[COLUMNS]}
        values, _problem = the_op().apply(kept, reply)
        return {**kept, **values}

    return preprocess, finish


def vllm_processor(model_source: str, *, concurrency: int, preprocess: Callable[[dict], dict], batch_size: int = 64,
                   engine_kwargs: dict[str, Any] | None = None) -> Any:
    """``ray.data.llm``'s processor over rows that ``preprocess`` gives chat ``messages`` and ``sampling_params``
    (the documented ``vLLMEngineProcessorConfig`` + ``build_processor``); one GPU per engine actor,
    ``concurrency`` actors. A failed row comes back with its ``__inference_error__`` (``finish`` degrades it)."""
    try:
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig
    except ImportError as err:
        raise ImportError(f"the GPU batch path needs vLLM: pip install 'tessera[gpu]' ({err})") from None
    config = vLLMEngineProcessorConfig(
        model_source=model_source, engine_kwargs=dict(engine_kwargs or {}), concurrency=concurrency,
        batch_size=batch_size, should_continue_on_error=True)
    return build_processor(config, preprocess=preprocess)


def vllm_stage(ds: Any, op: Operator, *, concurrency: int) -> Any:
    """``ds`` through the operator on vLLM: its preprocess, the engine, then each row finished by its ``apply``
    (error rows skip a processor's postprocess, so finishing is a map of its own)."""
    from operators.llm.aliases import resolve

    preprocess, finish = row_functions(op)
    processor = vllm_processor(resolve(op.params.model).model_source, concurrency=concurrency,
                               preprocess=preprocess)
    return processor(ds).map(finish)
