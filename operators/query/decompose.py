"""query.decompose: the sub-questions of a question, as extra queries."""

from __future__ import annotations

from typing import ClassVar

from operators.llm.gateway import Completion, LLMError
from operators.query._rewrite import QueryRewriter, RewriteParams


class QueryDecomposer(QueryRewriter):
    """Break each question into simpler sub-questions, each an extra query row.

    One call per query; sub-questions are checked, deduplicated and kept like
    ``query.expand``'s (``query_source: subquestion``), with the query's keywords as the
    fallback (nlp_retrieval's decomposition). For questions that need two facts
    ("Which river flows through the capital of France?"), each sub-question can find
    its own document.

    Usage::

        steps:
          parts:  {op: query.decompose, params: {max_queries: 3}}
          bm25:   {op: retrieve.bm25, params: {index: sample, k: 50}}
          merged: {op: fuse.expanded_queries}
    """

    name = "query.decompose"
    version = "4"  # 4: extra_queries on the question's row; 3: kept and left-out queries in its metadata; 2: added qids
    metadata_key = "sub_questions"
    aliases = ("decompose", "QueryDecomposer")
    Params: ClassVar[type[RewriteParams]] = RewriteParams
    system_prompt = "You split questions into simpler questions. Reply with one question per line and nothing else."
    prompt_template = ("Split this question into at most {count} simpler questions that together answer it.\n"
                       "Question: {query}")
    prompt_fields = ("query", "count")
    prompt_numbers = ("count",)

    def candidates(self, queries: dict[str, str]) -> dict[str, list[tuple[str, Completion | LLMError]]]:
        replies = self.ask({qid: self.render(query=query, count=self.params.max_queries)
                            for qid, query in queries.items()})
        return {qid: [("subquestion", reply)] for qid, reply in replies.items()}
