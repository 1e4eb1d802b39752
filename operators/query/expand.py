"""query.expand: more search queries per query, by strategy, searched beside the original."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from operators.llm.gateway import Completion, LLMError
from operators.query._rewrite import QueryRewriter, RewriteParams

Strategy = Literal["diversify", "specify", "broaden", "rephrase", "diagnose"]

#: What each strategy asks the model for ({count} queries).
INSTRUCTIONS: dict[str, str] = {
    "diversify": "Write {count} different search queries that look for the same information from other angles.",
    "specify": "Write {count} more specific search queries that add precise details to the question.",
    "broaden": "Write {count} broader search queries about the general topic of the question.",
    "rephrase": "Rephrase the question as {count} search queries with other words and the same meaning.",
    "diagnose": "The question may be vague or miss context. Write {count} search queries that say what it "
                "most likely means.",
}


class ExpandParams(RewriteParams):
    strategies: list[Strategy] = Field(["diversify", "specify", "broaden", "rephrase", "diagnose"], min_length=1,
                                       description="The strategies to use, one model call each per query: "
                                       "diversify, specify, broaden, rephrase, diagnose.")
    per_strategy: int = Field(2, gt=0, le=10, description="Queries asked of each strategy.")

    @field_validator("strategies")
    @classmethod
    def _each_once(cls, strategies: list[str]) -> list[str]:
        if twice := sorted({s for s in strategies if strategies.count(s) > 1}):  # the same calls sent twice
            raise ValueError(f"{', '.join(twice)} given more than once: each strategy is one call per query")
        return strategies


class QueryExpander(QueryRewriter):
    """Expand each query into more search queries (diversify, specify, broaden, rephrase, diagnose).

    One call per strategy and query; the replies are checked (length, letters, words),
    deduplicated by token overlap, and kept as extra query rows (``<qid>#<n>``,
    ``query_source`` = the strategy, ``original_qid``); the keywords of the query are
    the fallback when the model fails or writes nothing valid (the pipeline helpers'
    query expansion). Follow it with a retriever and ``fuse.expanded_queries``.

    Usage::

        steps:
          expand:   {op: query.expand, params: {strategies: [rephrase, broaden], max_queries: 2}}
          bm25:     {op: retrieve.bm25, params: {index: sample, k: 100}}
          merged:   {op: fuse.expanded_queries}
    """

    name = "query.expand"
    version = "4"  # 4: extra_queries on the question's row; 3: kept and left-out queries in its metadata; 2: added qids
    metadata_key = "expanded_queries"
    aliases = ("query_expansion", "QueryExpander")
    Params: ClassVar[type[ExpandParams]] = ExpandParams
    system_prompt = "You write web search queries. Reply with one query per line and nothing else."
    prompt_template = "{instruction}\nQuestion: {query}"
    prompt_fields = ("instruction", "query", "count")
    prompt_numbers = ("count",)

    def candidates(self, queries: dict[str, str]) -> dict[str, list[tuple[str, Completion | LLMError]]]:
        # Every (query, strategy) call at once, so a slow or hanging model costs one timeout, not one a strategy.
        count = self.params.per_strategy
        prompts = {(qid, strategy): self.render(instruction=INSTRUCTIONS[strategy].format(count=count), query=query,
                                                count=count)
                   for strategy in self.params.strategies for qid, query in queries.items()}
        replies = self.ask(prompts, qids={key: key[0] for key in prompts})
        found: dict[str, list[tuple[str, Completion | LLMError]]] = {qid: [] for qid in queries}
        for (qid, strategy), reply in replies.items():
            found[qid].append((strategy, reply))
        return found
