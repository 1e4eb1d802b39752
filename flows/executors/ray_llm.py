"""Which engine an LLM step runs on under the Ray Data executor, and the GPU path (``ray.data.llm``).

* **Default (CPU, or any model behind an API)**: the step is a ``map_batches`` stage on
  a fixed actor pool (``LLMStep.concurrency`` actors, 2 unless the spec says otherwise);
  each actor sends its calls through the gateway (litellm), ``params.concurrency`` at a
  time. A model server therefore sees at most actors x ``params.concurrency`` calls,
  whatever the cluster's size. The embedded model loads once per actor.
* **GPU with vLLM installed** (the ``gpu`` extra) and a step that asks for GPUs: Ray's
  own batch path, ``ray.data.llm``'s vLLM engine processor, which keeps the model on the
  GPU actors and batches continuously (``vllm_processor``). It takes rows that carry
  chat ``messages`` and returns them with ``generated_text``.

``llm_engine`` decides; it imports nothing heavy, so the choice is tested anywhere.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from operators.base import Operator


def is_llm_step(op: Operator) -> bool:
    from operators.llm.step import LLMStep

    return isinstance(op, LLMStep)


def llm_engine(op: Operator, num_gpus: float) -> str:
    """``"vllm"`` for an LLM step given GPUs where vLLM is installed, else ``"gateway"``."""
    if is_llm_step(op) and num_gpus > 0 and importlib.util.find_spec("vllm") is not None:
        return "vllm"
    return "gateway"


def vllm_processor(model_source: str, *, max_tokens: int, temperature: float, concurrency: int,
                   batch_size: int = 64, engine_kwargs: dict[str, Any] | None = None) -> Any:
    """``ray.data.llm``'s processor over rows with ``messages``: each row comes back with ``generated_text``
    and ``num_generated_tokens`` (the documented ``vLLMEngineProcessorConfig`` + ``build_processor``); one GPU
    per engine actor, ``concurrency`` actors."""
    try:
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig
    except ImportError as err:
        raise ImportError(f"the GPU batch path needs vLLM: pip install 'tessera[gpu]' ({err})") from None
    config = vLLMEngineProcessorConfig(
        model_source=model_source, engine_kwargs=dict(engine_kwargs or {}), concurrency=concurrency,
        batch_size=batch_size, should_continue_on_error=True)  # a failed row degrades, as in the gateway path
    sampling = {"temperature": temperature, "max_tokens": max_tokens}
    return build_processor(
        config,
        preprocess=lambda row: {**row, "sampling_params": sampling},
        postprocess=lambda row: {k: v for k, v in row.items() if k != "sampling_params"},
    )
