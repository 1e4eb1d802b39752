"""The short-answer mode of generate.answer (``style: short``): prompts that ask for the answer span alone, and
what is read from the reply.

Why a mode of its own: benchmark answers (HotpotQA, MuSiQue) are a few words, and a small model asked for a
sentence restates the question around them, which token F1 counts against it. A 135M model does not follow
"answer in a few words" written in the prompt; it does follow two earlier chat turns that answered so, hence
the example turns (about 100 prompt tokens more per call).
"""

from __future__ import annotations

import re
from typing import Any

SYSTEM = ("You answer questions with the shortest possible answer: a name, a date, a number, a place, or yes or "
          "no, copied from the documents. No sentence, no explanation.")
TEMPLATE = "Documents:\n{context}\n\nQuestion: {query}"
CLOSED_BOOK_SYSTEM = ("You answer questions with the shortest possible answer: a name, a date, a number, a place, "
                      "or yes or no. No sentence, no explanation.")
CLOSED_BOOK_TEMPLATE = "Question: {query}"

#: (document, question, answer): the example turns shown before every query.
_EXAMPLES = (
    ("[Document 1] Bram Stoker\nAbraham Stoker was an Irish author, best known for his 1897 Gothic novel Dracula. "
     "He was born in Dublin.", "In which city was the author of Dracula born?", "Dublin"),
    ("[Document 1] Apollo 11\nApollo 11 was the spaceflight that landed the first humans on the Moon, in July 1969.",
     "In what year did the first humans land on the Moon?", "1969"),
)


def echoed_example(answer: str, context: str) -> str | None:
    """Why ``answer`` is not to be trusted when it is an example turn's answer that the documents do not hold: a small
    model given documents it cannot answer from repeats the last example ("1969" for a question about leave days),
    which reads as a confident answer. None when the answer is not an example's or the context holds it."""
    said = answer.strip().strip(".").casefold()
    for _, _, example in _EXAMPLES:
        if said == example.casefold() and example.casefold() not in context.casefold():
            return f"the model repeated the prompt's example answer {example!r}, which no document holds"
    return None


def echoed_example_topic(answer: str, question: str, context: str, closed_book: bool) -> str | None:
    """Why ``answer`` is about an example turn, not the question asked: two or more of its words (by stem, stopwords
    aside) come from one example turn as the prompt shows it and from neither the question nor the context. The 135M
    model asked in German or Chinese, or closed-book about something it does not know, wrote "The first humans landed
    on the Moon", kept as a confident answer. None otherwise."""
    from operators.bm25s_import import load_bm25s

    load_bm25s()
    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN

    stemmer = Stemmer.Stemmer("english")  # one per call: a stemmer is not thread-safe

    def stems(text: str) -> set[str]:
        words = [w for w in re.findall(r"[^\W_]{3,}", text.casefold()) if w not in STOPWORDS_EN]
        return set(stemmer.stemWords(words))

    said = stems(answer) - stems(question) - stems(context)
    for document, example_question, example_answer in _EXAMPLES:
        shown = f"{example_question} {example_answer}" + ("" if closed_book else f" {document}")
        if len(said & stems(shown)) >= 2:
            return (f"the model wrote about the prompt's example question ({example_question!r}), not the question "
                    "asked")
    return None


def example_turns(closed_book: bool) -> list[dict[str, Any]]:
    """The user/assistant turns that show the model what a short answer looks like."""
    turns: list[dict[str, Any]] = []
    for document, question, answer in _EXAMPLES:
        text = CLOSED_BOOK_TEMPLATE.format(query=question) if closed_book \
            else TEMPLATE.format(context=f"{document}", query=question)
        turns += [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]
    return turns


_LEAD = re.compile(r"^\s*\**\s*(?:the\s+)?(?:short\s+|final\s+)?answer(?:\s+to\s+(?:the|this)\s+question)?"
                   r"\s*(?:is)?\s*\**\s*:?\s*", re.I)
_TOKEN = re.compile(r"\w[\w'’-]*|[^\w\s]")
_ARTICLES = {"a", "an", "the"}


def short_span(reply: str, query: str) -> str:
    """The answer span of a short reply: its first line without an ``Answer:`` lead or citations, and, when the
    model wrote a sentence anyway, only the stretch between its first and last word that the question lacks.

    "The county population of 9,984 is" asked about a county's population gives "9,984"; a reply made only of
    the question's words is kept as it is (there is nothing better to take). The question's words count by their
    stem ("makes" is the question's "make"), and the span does not stop mid-phrase (``_phrase_end``): "Bees are
    insects that makes honey." asked "Which insects produce honey?" gives the whole clause, not "... that makes".
    """
    from operators.bm25s_import import load_bm25s

    load_bm25s()
    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN, STOPWORDS_EN_PLUS

    line = next((ln for ln in reply.splitlines() if ln.strip()), "")
    line = _LEAD.sub("", re.sub(r"\[[\d,\s\-]*\]", " ", line)).strip(" \t.;:*\"'")
    words = list(_TOKEN.finditer(line))
    if len(words) <= 3:
        return line
    asked = {w.lower() for w in _TOKEN.findall(query)}
    known = asked | set(STOPWORDS_EN)
    stem = Stemmer.Stemmer("english").stemWord  # one per call: a stemmer is not thread-safe
    stems = {stem(w) for w in asked}  # a name's words are not inflected: "United States" where "State" was asked
    new = [w for w in words if w[0][0].isalnum() and w[0].lower() not in known
           and (w[0][:1].isupper() or stem(w[0]) not in stems)]
    if not new:
        return line
    first = words.index(new[0])
    while first > 0 and words[first - 1][0].lower() in _ARTICLES:  # "The Beatles", not "Beatles": answer
        first -= 1                                                   # metrics drop articles, readers do not
    if first > 0 and _title_starts_before(words, first, known):  # "To Kill a Mockingbird", not "Kill a ..."
        first -= 1
    last = _phrase_end(words, first, _name_after(line, words, words.index(new[-1]), set(STOPWORDS_EN)),
                       frozenset(STOPWORDS_EN_PLUS))
    return line[words[first].start():words[last].end()].strip(" ,;:")


#: How many words a span that stops mid-clause may grow by to reach the clause's end ("that makes" + "honey").
_CLAUSE_REST = 3
_CLOSING = {")", "]", "\"", "”", "’"}


def _phrase_end(words: list[re.Match], first: int, last: int, function_words: frozenset[str]) -> int:
    """Where a span that would end at ``words[last]`` ends so that it does not read as cut off: there, when it ends
    whole (``_ends_whole``); else at the end of its clause, when that is at most ``_CLAUSE_REST`` words on and whole
    ("that makes" -> "that makes honey"); else at the last place within it where a clause ends ("Eenasul Fateh (DJ)
    was a Bangladeshi-British cultural ..." -> "Eenasul Fateh (DJ)"), or a name or number ends ("Bees are a type of
    ..." -> "Bees"); else at the clause's end all the same, where it is whole (not where ``max_tokens`` cut the
    line). Token F1 pays a word or two of the question for the first; the reader would otherwise see an answer cut
    mid-phrase that no ``answer_cut`` flags."""
    if _ends_whole(words, last, function_words):
        return last
    end = last
    while end + 1 < len(words) and words[end + 1][0][0].isalnum():
        end += 1
    whole = _ends_whole(words, end, function_words)  # not when max_tokens cut the line there: "Colisée, which is a"
    if whole and end - last <= _CLAUSE_REST:
        return end
    within = range(last - 1, first - 1, -1)
    return next((i for i in within if _ends_whole(words, i, function_words, clause_only=True)),
                next((i for i in within if _ends_whole(words, i, function_words)), end if whole else last))


def _ends_whole(words: list[re.Match], i: int, function_words: frozenset[str], clause_only: bool = False) -> bool:
    """Whether a span can end at ``words[i]`` without reading as cut: its clause ends there (punctuation or the end
    of the line follow, or it is a closing bracket or quote), or, unless ``clause_only``, it is a name or a number
    ("Bees", "1969": capitalised or with a digit) that is not a function word ("In", "The", "Which"); a lowercase
    word followed by more of its clause ("makes", "of", "that") leaves it dangling. ``function_words``: bm25s's
    longer English stopword list, which ``short_span`` imported."""
    word = words[i][0]
    if word in _CLOSING:
        return True
    if not word[0].isalnum() or word.lower() in function_words:
        return False
    if i + 1 == len(words) or not words[i + 1][0][0].isalnum():
        return True
    return not clause_only and (word[:1].isupper() or any(c.isdigit() for c in word))


def _name_after(line: str, words: list[re.Match], last: int, small: set[str]) -> int:
    """Where a span that ends at ``words[last]`` ends: past the capitalised words (not ``small`` ones: "The", "And")
    that follow a lowercase last word directly, the name it qualifies ("of northern France", not "of northern",
    where the question named France)."""
    if not words[last][0][:1].islower():
        return last
    while last + 1 < len(words) and words[last + 1][0][:1].isupper() and words[last + 1][0].lower() not in small \
            and line[words[last].end():words[last + 1].start()] == " ":
        last += 1
    return last


def _title_starts_before(words: list[re.Match], first: int, known: set[str]) -> bool:
    """Whether the capitalised small word before ``words[first]`` begins the title that starts there: a title goes
    on past a small lowercase word to a capitalised one ("To Kill a Mockingbird", "Of Mice and Men"), where a
    sentence's first word before a name does not ("In Paris", "By William Shakespeare")."""
    before, name = words[first - 1][0], [w[0] for w in words[first:first + 3]]
    return (before[:1].isupper() and before.lower() in known and len(name) == 3 and name[0][:1].isupper()
            and name[1].islower() and name[1] in known and name[2][:1].isupper())
