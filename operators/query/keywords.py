"""query.keywords: the keywords of a query, as one extra query."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field

from operators.llm.gateway import Completion, LLMError
from operators.query._rewrite import LIST_MARK, QueryRewriter, RewriteParams, keywords_of


class KeywordParams(RewriteParams):
    max_queries: int = Field(1, gt=0, le=1, description="The keywords make one extra query.")
    min_words: int = Field(1, ge=1, description="The keyword query needs at least this many words.")
    min_chars: int = Field(3, ge=1, description="A keyword query shorter than this is dropped.")
    count: int = Field(5, gt=0, le=30, description="Keywords asked of the model; the extra query holds at most these.")


class KeywordExtractor(QueryRewriter):
    """The keywords of each query, asked of the model, as one extra query row of keywords.

    The reply is read as a list (commas, semicolons or lines, list marks dropped) of at most
    ``count`` keywords; a reply that is no list (``bee honey pollen``) is a list of its words. Each
    keyword's words less stopwords and the instructions' own words (``keywords``, ``search``,
    ``question``, unless the question has them), joined by spaces, are the extra query
    (``query_source: keywords``; nlp_retrieval's keyword queries); an item left with no word (a
    ``Keywords:`` label) is no keyword. A keyword the query lacks (a synonym) is kept: that is
    what the model adds. Without a usable reply the query's first ``count`` words less stopwords
    are the extra query instead.

    Usage::

        steps:
          kw:     {op: query.keywords, params: {count: 5}}
          bm25:   {op: retrieve.bm25, params: {index: sample, k: 50}}
          merged: {op: fuse.expanded_queries}
    """

    name = "query.keywords"
    version = "4"  # 4: extra_queries on the question's row; 3: kept and left-out queries in its metadata; 2: added qids
    metadata_key = "keyword_queries"
    aliases = ("keywords", "KeywordExtractor")
    Params: ClassVar[type[KeywordParams]] = KeywordParams
    system_prompt = "You pick search keywords. Reply with the keywords separated by commas and nothing else."
    prompt_template = "The {count} most important search keywords of this question: {query}"
    prompt_fields = ("query", "count")
    prompt_numbers = ("count",)

    def candidates(self, queries: dict[str, str]) -> dict[str, list[tuple[str, Completion | LLMError]]]:
        replies = self.ask({qid: self.render(query=query, count=self.params.count) for qid, query in queries.items()})
        return {qid: [("keywords", reply)] for qid, reply in replies.items()}

    def _kept(self, qid: str, query: str, replies: list[tuple[str, Completion | LLMError]],
              earlier: list[str] = ()) -> list[tuple[str, str]]:
        self._question = query  # for split: the prompt's own words are no keywords unless the question has them
        return super()._kept(qid, query, replies, earlier)

    def reply_queries(self, reply: Completion) -> list[str]:
        """``split`` of a reply, less its last keyword when ``max_tokens`` cut it there."""
        text = reply.text
        if reply.finish_reason == "length":
            text = re.split(r"[,;\n](?=[^,;\n]*$)", text)[0] if re.search(r"[,;\n]", text) else ""
        return self.split(text)

    def split(self, text: str) -> list[str]:
        """At most ``count`` keywords: a run of words without commas was kept whole (``count: 2`` gave five words),
        a list's numbers were kept as words, and a label or an empty item took a keyword's place."""
        items = re.split(r"[,;\n]", text)
        if len(items) == 1:  # asked for a list, the model wrote words
            items = text.split()
        own = self._prompt_words()
        keywords = []
        for item in items:
            words = [word for word in keywords_of(LIST_MARK.sub("", item)).split()
                     if not {word, word + "s", word.removesuffix("s")} & own]
            if words:
                keywords.append(words)
        joined = " ".join(dict.fromkeys(word for words in keywords[:self.params.count] for word in words))
        return [joined] if joined else []

    def fallback_query(self, query: str) -> str:
        return " ".join(keywords_of(query).split()[:self.params.count])

    def _prompt_words(self) -> set[str]:
        """The instructions' words that the question lacks, dropped from a reply in singular or plural: the small
        model answers 'The bee is the most important search keyword of this question.', whose 'search keyword
        question' made the keyword query (as a reply's 'Keywords:' label did)."""
        prompts = self.prompts()
        instructions = re.sub(r"\{\w+\}", " ", f"{prompts['system'] or ''} {prompts['prompt']}").lower()
        return set(keywords_of(instructions).split()) - set(keywords_of(getattr(self, "_question", "")).split())
