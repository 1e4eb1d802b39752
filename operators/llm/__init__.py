"""Language models for operators (a building block like ``models`` and ``store``, not a category).

Every model call in Tessera goes through ``complete`` / ``complete_many``
(``gateway``), which call litellm: the embedded GGUF model (``embedded``, a litellm
custom provider running llama.cpp in-process), Ollama, DeepSeek, OpenAI or any
OpenAI-compatible server are one code path. ``aliases`` maps the names specs use
(``local``, ``gemma2``, ...) to litellm model strings (``models.yaml``, overridable by
the user). No operator imports a model SDK of its own.

How an LLM operator is written: subclass ``LLMStep`` (``step``), which brings the
params (model, temperature, max_tokens, timeout, retries, prompt overrides, on_error),
the cache rule (cached at temperature 0 only), usage recording and the degrade policy.
The operator adds its prompts and its parsing::

    class Summarizer(LLMStep):
        \"\"\"Summarise each query's top documents.\"\"\"

        name = "summarize.results"
        scope = "query"
        system_prompt = "You write short, faithful summaries."
        prompt_template = "Summarise these documents for the question {query}:\\n{documents}"
        prompt_fields = ("query", "documents")

        def transform(self, table):
            groups = dict(qid_groups(table))
            replies = self.ask({qid: self.render(query=..., documents=...) for qid, rows in groups.items()})
            for qid, reply in replies.items():
                problem = junk_reason(reply)
                if problem:
                    self.degrade(qid, problem)        # rows stay as they came; the query is marked degraded
                else:
                    self.emit_metadata(qid, "summary", reply.text.strip())
            return table

``self.ask`` takes one prompt per key (a qid, or any id) and returns a ``Completion``
(text, tokens, seconds) or an ``LLMError`` per key; the tokens and seconds are already
in the step record and the query's ``usage`` metadata. docs/llm.md has the rest.
"""

import os

# litellm fetches its model price list from the internet when imported unless told to use the copy it ships;
# set before any module of this package imports litellm.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from operators.llm.aliases import ModelAlias, ModelConfigError, aliases, resolve
from operators.llm.gateway import Completion, LLMError, complete, complete_many
from operators.llm.step import LLMParams, LLMStep, junk_reason, repetition

__all__ = ["Completion", "LLMError", "LLMParams", "LLMStep", "ModelAlias", "ModelConfigError", "aliases",
           "complete", "complete_many", "junk_reason", "repetition", "resolve"]
