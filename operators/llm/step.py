"""What every LLM operator shares: its params, prompts, cache rule, usage records and failure policy.

A subclass of ``LLMStep`` gives a ``name``, its prompts (``system_prompt`` and
``prompt_template``, ``str.format`` templates a spec may override with the params
``system_prompt`` and ``prompt``), and its ``transform``, which calls ``self.ask`` with
one prompt per unit of work and parses what comes back. Everything else is here:

* **Params** (``LLMParams``): ``model`` (an alias or a litellm string), ``temperature``, ``seed``,
  ``max_tokens``, ``timeout``, ``total_timeout``, ``num_retries``, ``on_error``.
* **Cache rule.** The cache identity is the params, the resolved model (an alias can be
  redefined) and the prompt templates. ``temperature`` 0 is deterministic, so the step
  is cached; above 0 each run must sample afresh, so ``cacheable`` is False for that
  step (an instance attribute set from the params; ``cacheable_if`` says so to ``tessera ops``),
  unless a ``seed`` names the sample to draw: the same seed asks for the same reply again.
* **Usage.** Every call's prompt/completion tokens and seconds go to the step record
  (``record_usage``: the flow result's step table, both executors) and to the query's
  metadata under ``usage`` keyed by step id.
* **Failure policy** (the rerankers', ``operators/rerank/base.py``): with ``on_error:
  degrade`` (default) a call that errors, times out or returns junk leaves the rows as
  they came in, the query is marked ``degraded`` with the step and reason in the flow
  result's metadata, the failure is logged, and the flow goes on. ``on_error: error``
  fails the step.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any, Callable, ClassVar, Hashable, Literal, Mapping, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.base import Operator
from operators.errors import ParamsError, SpecError, one_line
from operators.llm.aliases import key_env, known_model, missing_file, model_identity, no_server, resolve
from operators.llm.gateway import Completion, LLMError, Prompt, complete_many, messages_of
from operators.llm.seeds import call_seed
from operators.local_files import llm_model

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)


class LLMParams(BaseModel):
    """Parameters every LLM operator takes."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("local", min_length=1, json_schema_extra=llm_model(), description="A model alias "
                       "(`tessera models` lists them: local, gemma2, qwen2.5, llama3.1, DeepSeekv3) or any litellm "
                       "model string "
                       "('openai/gpt-4o-mini', 'ollama_chat/phi3').")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature. 0 is deterministic and the "
                               "step is cached; above 0 the step is not cached (each run samples afresh) unless "
                               "a seed is given.")
    seed: int | None = Field(None, ge=-2**63, le=2**63 - 1, description="Seed of the model's sampling (above "
                             "temperature 0), passed to the model as OpenAI's seed: the same seed, prompt and model "
                             "give the same reply (the embedded model; a server as far as it keeps to it), so a "
                             "seeded step is cached; null draws a fresh sample each call.")
    max_tokens: int = Field(256, gt=0, le=32768, description="Most tokens the model may write per call.")
    timeout: float | None = Field(None, gt=0, description="Seconds one call may take (per attempt; litellm's "
                                  "timeout); null takes the alias's setting (60 s by default, the local model 300 s).")
    total_timeout: float | None = Field(None, gt=0, description="Seconds one call may take in all, its retries "
                                        "included (a server that writes a word now and then is not held to "
                                        "`timeout`); past it the call is abandoned and the query degraded. null takes "
                                        "the alias's setting, else the timeout (and a second) for each attempt, one "
                                        "more timeout and litellm's backoffs: about 249 s by default.")
    num_retries: int | None = Field(None, ge=0, description="litellm's retries after a timeout, a rate limit or "
                                    "a server error; null takes the alias's setting (2 by default). Placed on a "
                                    "deployment: retries after a lost replica or a shed request only (null: 2).")
    concurrency: int | None = Field(None, gt=0, description="Calls in flight at once (per process, never more "
                                    "than the alias's max_parallel_requests); null takes the alias's "
                                    "max_parallel_requests (the embedded model: 1), else 4.")
    system_prompt: str | None = Field(None, description="Replaces the operator's system prompt; null keeps it.")
    prompt: str | None = Field(None, description="Replaces the operator's prompt template (str.format fields: see "
                               "the operator's description); null keeps it.")
    on_error: Literal["degrade", "error"] = Field(
        "degrade", description="When a call errors, times out or returns junk: 'degrade' keeps the rows as they "
        "came in and marks the query degraded (with the reason, in the result metadata and the log); 'error' "
        "fails the step.")

    _a_known_model = field_validator("model")(known_model)


class LLMStep(Operator):
    """Base of the LLM operators (not registered: it has no name); see the module docstring."""

    Params: ClassVar[type[BaseModel]] = LLMParams
    #: Each batch waits for model calls: keep batches small so progress and cancels come often.
    batch_size: ClassVar[int | None] = 200
    #: On the Ray executor, a fixed pool of this many actors (a spec's step ``concurrency`` overrides it), so a
    #: model server sees at most actors x ``params.concurrency`` calls at once, however large the cluster.
    concurrency: ClassVar[int | None] = 2
    system_prompt: ClassVar[str] = ""
    prompt_template: ClassVar[str] = ""
    cacheable_if: ClassVar[str | None] = "temperature == 0 or seed is set"
    #: The fields ``prompt_template`` is formatted with (a spec's ``prompt`` may use only these).
    prompt_fields: ClassVar[tuple[str, ...]] = ()
    #: The fields a spec's ``prompt`` must use (the text the step is about); it must use one field at least.
    prompt_required: ClassVar[tuple[str, ...]] = ()
    #: The fields of ``prompt_fields`` filled with a number (``count``), the others with text: a format spec in a
    #: spec's ``prompt`` is tried on a value of its field's kind (``{count:d}`` works, ``{query:d}`` does not).
    prompt_numbers: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cacheable = self.params.temperature == 0 or self.params.seed is not None  # type: ignore[misc]
        if self.params.prompt is not None:
            unknown = set(_format_fields(self.params.prompt)) - set(self.prompt_fields)
            if unknown:
                raise ParamsError(f"the prompt uses {sorted(unknown)}; it may use {list(self.prompt_fields)}",
                                  op=self.name, step=self.step_id, field="params.prompt")
            used = set(_format_fields(self.params.prompt))
            missing = [f for f in self.prompt_required if f not in used]
            if self.prompt_fields and (missing or not used):  # "", "Summarize it.": the input never reaches the model
                wanted = " or ".join("{" + f + "}" for f in (missing[:1] or self.prompt_fields))
                raise ParamsError(f"the prompt must use {wanted}: without it the model never sees what the step is "
                                  "about, and every call sends the same prompt", op=self.name, step=self.step_id,
                                  field="params.prompt")
            _check_format_specs(self.params.prompt, self)
            self._try_prompt(self.params.prompt)

    def _try_prompt(self, template: str) -> None:
        """Refuse a ``prompt`` that its fields would not fill at run time, after the retrieval in front of it: a
        field with no name (``{}``, ``{0}``), an unknown conversion (``{query!x}``), a format spec its field's value
        does not take (``{documents:d}``). Tried once here on values of each field's kind."""
        sample = {name: 1 if name in self.prompt_numbers else "text" for name in self.prompt_fields}
        try:
            template.format(**sample)
        except IndexError:
            raise ParamsError(f"the prompt has a field with no name ({{}} or a number); name one of "
                              f"{list(self.prompt_fields)}, and write {{{{ and }}}} for a brace of the text",
                              op=self.name, step=self.step_id, field="params.prompt") from None
        except (ValueError, TypeError, AttributeError) as err:
            raise ParamsError(f"the prompt is not a valid template: {err}", op=self.name, step=self.step_id,
                              field="params.prompt") from None

    # -- prompts ---------------------------------------------------------------

    def prompts(self) -> dict[str, str]:
        """The templates in force (the params' overrides, else the class's)."""
        return {"system": self.params.system_prompt if self.params.system_prompt is not None else self.system_prompt,
                "prompt": self.params.prompt if self.params.prompt is not None else self.prompt_template}

    def render(self, **fields: Any) -> list[dict[str, Any]]:
        """Chat messages: the system prompt, then the prompt template filled with ``fields``."""
        templates = self.prompts()
        return messages_of(templates["prompt"].format(**fields), templates["system"] or None)

    def cache_identity(self) -> dict[str, Any]:
        """Without ``total_timeout``: how long a call may take is not what its reply says (a call past it degrades
        its query, which is never stored), and a step cached before the param came is found again."""
        params = {name: value for name, value in super().cache_identity().items() if name != "total_timeout"}
        return {**params, "resolved_model": model_identity(self.params.model), "prompts": self.prompts()}

    # -- calling the model --------------------------------------------------------

    def calls_model(self) -> bool:
        """Whether the step asks a model at all with its params (the service places only those that do)."""
        return True

    def required_env(self) -> dict[str, str]:
        """With the marked params', the key variable of the model alias the step calls (``DeepSeekv3``:
        ``DEEPSEEK_API_KEY``), so a flow whose key is unset is refused before the retrieval in front of it runs;
        nothing for a model that needs no key (an Ollama alias, the embedded one) or a step that calls none."""
        found = super().required_env()
        if self.calls_model() and (variable := key_env(self.params.model)):
            found["params.model"] = variable
        return found

    def required_models(self) -> dict[str, str]:
        """With the marked params', the .gguf file the step's embedded model names when it is not there, so the flow
        is refused before the retrieval in front of it (``MissingModelsError``, as a missing encoder is). A file that
        is there is not declared: the pre-run check resolves model folders, and loading is the call's to try."""
        found = super().required_models()
        if self.calls_model() and (missing := missing_file(self.params.model)):
            found["params.model"] = missing
        return found

    def ask(self, prompts: Mapping[K, Prompt], qids: Mapping[K, str] | None = None,
            on_text: Callable[[K, str], None] | None = None,
            options: Mapping[str, Any] | None = None) -> dict[K, Completion | LLMError]:
        """One call per key (a qid, or any id the subclass uses), concurrently; usage recorded.

        ``qids`` names the query each key's usage belongs to when the keys are not qids (one call
        per row, or several per query: the LLM rerankers key calls by number). A failed call comes
        back as its ``LLMError`` (decide with ``degrade``). With ``on_text`` the replies are streamed:
        it gets the key and each piece of its reply as the model writes it. ``options`` go with each call
        beside the params' (an LLM judge's ``response_format``).
        """
        keys = list(prompts)
        pieces = None if on_text is None else (lambda position, piece: on_text(keys[position], piece))
        seeds = None if self.params.seed is None else \
            [call_seed(self.params.seed, qids[k] if qids is not None else k) for k in keys]
        results = self.calls([prompts[k] for k in keys], pieces, options or {}, seeds)
        for key, result in zip(keys, results):
            if isinstance(result, Completion):
                self.record(qids[key] if qids is not None else key, result)
            elif result.seconds:  # sent and failed: the time it took is spent all the same
                self.record_usage(llm_calls=1, llm_failed=1, llm_seconds=result.seconds)
                add_query_usage(self, qids[key] if qids is not None else key, self.params.model,
                                seconds=result.seconds, failed=1)
        return dict(zip(keys, results))

    def calls(self, prompts: list[Prompt], on_text: Callable[[int, str], None] | None,
              options: Mapping[str, Any], seeds: list[int | None] | None = None) -> list[Completion | LLMError]:
        """The model's reply to each prompt, in order (``on_text(position, piece)`` when streamed), each sampled with
        its seed of ``seeds`` (``seeds.call_seed``): through the gateway here, through a Serve deployment in a placed
        step (``flows.placement``)."""
        p = self.params
        return complete_many(prompts, model=p.model, concurrency=p.concurrency, temperature=p.temperature,
                             max_tokens=p.max_tokens, timeout=p.timeout, num_retries=p.num_retries, on_text=on_text,
                             total_timeout=p.total_timeout, seeds=seeds, **options)

    def record(self, qid: str, done: Completion) -> None:
        """Add one call's usage to the step record and to the query's ``usage`` metadata."""
        record_call(self, qid, self.params.model, done)


def check_before_run(op: Operator, step: str) -> None:
    """What a language-model step ``op`` needs that its params cannot say, checked before a flow runs: a model that
    reaches no server (``hosted_vllm/...`` without its address: each call failed after its retries) is a
    ``SpecError`` naming ``params.model``; a bad ``$TESSERA_LLM_THREADS`` where the embedded model runs, the
    ``SettingError`` naming it (found at the step, after the retrieval before it). Other steps: nothing."""
    if not isinstance(op, LLMStep):
        return
    if (problem := no_server(op.params.model)) is not None:
        raise SpecError(problem, step=step, field=f"steps.{step}.params.model")
    if resolve(op.params.model).embedded:
        from operators.llm.embedded_model import threads_setting

        threads_setting()


def record_call(op: Operator, qid: str, model: str, done: Completion) -> None:
    """Add one call of ``op`` to ``model`` to its step record and to query ``qid``'s ``usage`` metadata (under
    the step's id: calls, tokens, seconds). A replayed call (an interrupted run's, read back) goes to the query's
    usage only, as a cached unit's does: the step record counts what this run spent."""
    if not done.replayed:
        op.record_usage(llm_calls=1, prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens,
                        llm_seconds=done.seconds)
    add_query_usage(op, qid, model, seconds=done.seconds, prompt_tokens=done.prompt_tokens,
                    completion_tokens=done.completion_tokens)


def add_query_usage(op: Operator, qid: str, model: str, *, seconds: float, prompt_tokens: int = 0,
                    completion_tokens: int = 0, failed: int = 0) -> None:
    """Add one call to query ``qid``'s ``usage`` metadata under the step's id; a call that was sent and failed
    counts in ``failed`` too (a degraded answer's usage says what its failed calls cost)."""
    mine = op.notes().metadata.get(str(qid), {}).get("usage", {}).get(op.step_id)
    totals = dict(mine) if mine else {"model": model, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                      "seconds": 0.0}
    totals["calls"] += 1
    totals["prompt_tokens"] += prompt_tokens
    totals["completion_tokens"] += completion_tokens
    totals["seconds"] = round(totals["seconds"] + seconds, 4)
    if failed:
        totals["failed"] = totals.get("failed", 0) + failed
    op.emit_metadata(qid, "usage", {op.step_id: totals})


def junk_reason(result: Completion | LLMError) -> str | None:
    """Why a call's result cannot be used (an error, or a reply without a letter or digit); None if it can."""
    if isinstance(result, LLMError):
        return f"{result.kind}: {result.message}"
    if not re.search(r"\w", result.text):
        return f"the model returned no usable text ({result.text[:40]!r}, finish reason {result.finish_reason})"
    return None


#: Where a sentence ends: its stop (and closing quotes or brackets), then a space or the end.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*(?:\s+|$)")


def repetition(text: str) -> str | None:
    """Why a reply is a small model's loop, not text: the same lines over and over, or the same few words, from the
    start or after a sound start (the reply's second half), or one sentence three times or more however short, in a
    row ('Bees make honey. Bees make honey. Bees make honey.') or as half the reply's sentences; None if it is not
    one. Every operator that keeps the model's words (an answer, a summary) checks it, beside ``junk_reason``."""
    lines = [line.strip(" -*0123456789.[]:") for line in text.splitlines() if line.strip()]
    if len(lines) >= 4 and len(set(lines)) <= len(lines) / 2:
        return f"the reply repeats itself ({len(lines)} lines, {len(set(lines))} different)"
    sentences = [" ".join(re.findall(r"[^\W_]+", s.lower())) for s in _SENTENCE_END.split(text)]
    sentences = [s for s in sentences if s]
    for i in range(len(sentences) - 2):  # a short loop: one sentence three times in a row, too few words for below
        if sentences[i] == sentences[i + 1] == sentences[i + 2]:
            times = next((n for n in range(i + 3, len(sentences)) if sentences[n] != sentences[i]), len(sentences)) - i
            return f"the reply repeats itself (the same sentence {times} times in a row)"
    if sentences and (top := Counter(sentences).most_common(1)[0][1]) >= 3 and top * 2 >= len(sentences):
        return f"the reply repeats itself (the same sentence {top} times in {len(sentences)})"  # A. B. A. B. A.
    words = text.lower().split()
    for part in (words, words[len(words) // 2:]):  # a loop within a line ("word word word ..."), anywhere
        grams = list(zip(part, part[1:], part[2:], part[3:]))
        if len(part) >= 40 and len(set(grams)) < len(grams) / 4:
            return f"the reply repeats itself ({len(part)} words, {len(set(grams))} different runs of four)"
    return None


#: The widest a prompt's format spec may pad or the most digits it may print (``{query:>40}``): ``{query:>300000000}``
#: made each call's prompt 300 MB (allocated as a spec was checked, then sent to the model), so one request could take
#: the memory of the process that runs it, the service's ingress for a search.
MAX_FORMAT_WIDTH = 1000


def _check_format_specs(template: str, step: Operator) -> None:
    """A ``ParamsError`` naming ``params.prompt`` for a format spec wider than ``MAX_FORMAT_WIDTH`` or one that takes
    its width from a field (``{query:>{count}}``, where a query's text could be ``999999999``)."""
    import string

    for _, name, spec, _ in string.Formatter().parse(template):
        if not name or not spec:
            continue
        if "{" in spec:
            raise ParamsError(f"the prompt's field {{{name}:{spec}}} takes its format from another field; write the "
                              "width as a number", op=step.name, step=step.step_id, field="params.prompt")
        if any(int(number) > MAX_FORMAT_WIDTH for number in re.findall(r"\d+", spec)):
            raise ParamsError(f"the prompt's field {{{name}:{one_line(spec, 20)}}} pads or prints more than "
                              f"{MAX_FORMAT_WIDTH} characters; a format spec's numbers are at most {MAX_FORMAT_WIDTH}",
                              op=step.name, step=step.step_id, field="params.prompt")


def _format_fields(template: str) -> list[str]:
    import string

    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name]
    except ValueError as err:
        raise ParamsError(f"the prompt is not a valid template: {err}", field="params.prompt") from None


__all__: Sequence[str] = ("LLMParams", "LLMStep", "junk_reason", "repetition")
