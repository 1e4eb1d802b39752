"""The follow-up modes of ``retrieve.multi_hop``: how a seed document becomes the next hop's query (``titles``,
``texts``, ``mentions``, ``links``, ``llm``, one method each), and which of what a ``mentions`` query finds is kept
(``mentioned``). Apart from ``multi_hop`` (the hops, their searches and their fusion), whose operator inherits
``FollowUps``; the ``llm`` mode's warnings keep that operator's logger."""

from __future__ import annotations

import logging
import re

import pyarrow as pa

log = logging.getLogger("operators.retrieve.multi_hop")  # the operator's logger, as before the split

#: The query metadata of ``follow_up: llm``: the follow-up queries searched for a question (the model's, or a seed's
#: title where it failed), so a result the question's own ranking lacks can be traced to them.
FOLLOW_UPS = "follow_up_queries"
_FOLLOW_UP_SYSTEM = "You write web search queries. Reply with one query and nothing else."
_FOLLOW_UP_PROMPT = ("Question: {question}\nA document found so far: {title}: {text}\n"
                     "Write a search query for the next document needed to answer the question.")


class FollowUps:
    """One query per seed row for each ``follow_up`` mode (``_follow_up_<mode>(seeds, questions)``), mixed into
    ``MultiHopRetriever``, whose ``params``, usage and metadata they use."""

    def _follow_up_titles(self, seeds: pa.Table, questions: list[str]) -> list[str]:
        titles = seeds.column("title").to_pylist()
        texts = seeds.column("text").to_pylist()
        return [(title or "").strip() or " ".join((text or "").split()[:30]) for title, text in zip(titles, texts)]

    def _follow_up_texts(self, seeds: pa.Table, questions: list[str]) -> list[str]:
        titles = seeds.column("title").to_pylist()
        texts = seeds.column("text").to_pylist()
        return [f"{title or ''} {text or ''}".strip() for title, text in zip(titles, texts)]

    _follow_up_mentions = _follow_up_texts

    def _follow_up_links(self, seeds: pa.Table, questions: list[str]) -> list[str]:
        return [text or "" for text in seeds.column("text").to_pylist()]

    def _follow_up_llm(self, seeds: pa.Table, questions: list[str]) -> list[str]:
        """The model's query for what the question still needs after the seed; the seed's title where it fails."""
        from operators.llm.gateway import Completion, complete_many, messages_of
        from operators.llm.step import add_query_usage, junk_reason, record_call

        prompts = [messages_of(_FOLLOW_UP_PROMPT.format(question=q, title=title or "", text=" ".join(
            (text or "").split())[:600]), _FOLLOW_UP_SYSTEM) for q, title, text in
            zip(questions, seeds.column("title").to_pylist(), seeds.column("text").to_pylist())]
        p = self.params
        results = complete_many(prompts, model=p.follow_up_model, temperature=0.0, max_tokens=32,
                                timeout=p.follow_up_timeout, num_retries=p.follow_up_retries)
        queries, failed = [], {}
        for qid, result, title in zip(seeds.column("qid").to_pylist(), results,
                                      self._follow_up_titles(seeds, questions)):
            problem = junk_reason(result)
            line = "" if problem else next((ln.strip(" -*\"'") for ln in result.text.splitlines() if ln.strip()), "")
            if isinstance(result, Completion):  # a reply, used or not, cost its tokens
                record_call(self, str(qid), self.params.follow_up_model, result)
            elif result.seconds:  # sent and failed: its time is spent all the same (as LLMStep.ask counts it)
                self.record_usage(llm_calls=1, llm_failed=1, llm_seconds=result.seconds)
                add_query_usage(self, str(qid), p.follow_up_model, seconds=result.seconds, failed=1)
            usable = line if re.search(r"[^\W\d_]", line) else None
            queries.append(usable or title)
            written = self.notes().metadata.get(str(qid), {}).get(FOLLOW_UPS, [])  # hop by hop, what it searched
            self.emit_metadata(qid, FOLLOW_UPS, [*written, usable or title])
            if usable is None:
                failed.setdefault(qid, []).append(problem or f"no query in {result.text[:40]!r}")
        for qid, reasons in failed.items():  # the rerankers' policy: the query goes on, marked and logged
            many = len(reasons) > 1
            reason = (f"{len(reasons)} follow-up {'queries are seed titles' if many else 'query is a seed title'} "
                      f"(the model failed: {reasons[0]})")
            log.warning("%s [%s]: query %s: %s", self.name, self.step_id, qid, reason)
            self.mark_degraded(qid, reason)  # (no on_error: the titles are a fair follow-up)
        return queries


def mentioned(titles: list[str | None], texts: list[str | None]) -> list[bool]:
    """Per row, whether its title (without a trailing parenthesis: "Kiss and Tell (1945 film)") appears, as whole
    words and ignoring case, in the text of the seed that found it."""
    found = []
    for title, text in zip(titles, texts):
        name = re.sub(r"\s*\([^)]*\)\s*$", "", title or "").strip().lower()
        found.append(bool(name) and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", (text or "").lower()) is not None)
    return found
