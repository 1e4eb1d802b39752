"""Answer measures: exact match and token F1 of a flow's answers against the dataset's answers.

A flow answers a query when its result's per-query metadata holds ``answer`` (the key
``generate.answer`` writes); a flow that answers nothing has no answer measures. The
gold answers are ``answer`` and ``answer_aliases`` of the dataset's ``questions.jsonl``
(the multi-hop sets ship it); an answer scores its best over them. Normalisation and
scores are torchmetrics' SQuAD metric, the SQuAD v1.1 evaluation script's definition
(Rajpurkar et al., EMNLP 2016): lower case, punctuation and the articles a/an/the
removed, whitespace collapsed; EM is 1 when the normalised strings are equal, F1 the
harmonic mean of precision and recall over the normalised tokens (as a bag). A query
the flow left unanswered scores 0 on both, as does one it abstained on (``abstained``: generate.answer's
``min_relevance`` found no passage close enough); a question without a gold answer is not counted.
"""

from __future__ import annotations

import io
import json
from itertools import islice
from pathlib import Path
from typing import Any, Mapping

from flows.bench.errors import BenchError
from flows.queries import ID_FIELDS

MEASURES = ("AnswerEM", "AnswerF1")
#: The per-query metadata key that holds a flow's answer.
ANSWER_KEY = "answer"


def load_gold(path: Path, qids: list[str]) -> dict[str, list[str]]:
    """``{qid: [answer, *aliases]}`` for the evaluated qids that ``questions.jsonl`` answers (empty: no file).

    ``answer`` is a string or a list of strings (each one a correct answer); a question whose answers are all
    null or blank has no gold answer, so it is left out of the answer measures rather than scored 0."""
    if not path.is_file():
        return {}
    wanted, gold, lines = set(qids), {}, {}
    with io.StringIO(_utf8_text(path)) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                qid, answers = _question(row)
            except (ValueError, TypeError) as err:
                raise BenchError(f"{path} line {number}: not a question with '_id' and 'answer' ({err})",
                                 field="dataset") from None
            if qid in lines:
                raise BenchError(f"{path} line {number}: question '{qid}' is there already (line {lines[qid]}): "
                                 "give each question one line, its answers in a list", field="dataset")
            lines[qid] = number
            texts = list(dict.fromkeys(str(a) for a in answers if a is not None and str(a).strip()))
            if qid in wanted and texts:
                gold[qid] = texts
    return gold


def _utf8_text(path: Path) -> str:
    """The questions file's text, a byte order mark dropped (it is not part of the first question); one that is not
    UTF-8 (Notepad's Windows-1252) is a ``BenchError`` naming the byte and the iconv line: it was an internal
    error."""
    from operators.sources.encoding import not_utf8_at, save_as_utf8

    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise BenchError(f"{path}: not UTF-8 text ({not_utf8_at(err)}); {save_as_utf8(data)}",
                         field="dataset") from None


def held_by_queries(queries: Path) -> str:
    """Gold answers written into ``queries.jsonl`` (where a QA set keeps them) are not read: say where they go."""
    with open(queries, encoding="utf-8-sig", errors="replace") as f:
        for line in islice(f, 20):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            held = [k for k in ("answer", "answers", "answer_aliases") if isinstance(row, dict) and k in row]
            if held:
                return (f" ({queries} holds {', '.join(map(repr, held))}, which the benchmark does not read: write "
                        f"questions.jsonl beside it, one {{\"_id\": ..., \"answer\": ...}} a line, where an answer "
                        "may be a list of correct answers)")
    return ""


#: A question's id, under the names queries.jsonl's may have, in the order they are read there
#: (``flows.queries.ID_FIELDS``): a questions file written beside ``{"qid": ..., "query": ...}`` queries was refused
#: as '('_id')', a Python KeyError's words, and a line holding both a ``qid`` and an ``_id`` was keyed by the other.
_ID_FIELDS = ID_FIELDS


def _question(row: Any) -> tuple[str, list[Any]]:
    """A line's question id and its answers (``answer``, then ``answer_aliases``); ``TypeError`` says what is
    missing or of the wrong kind."""
    if not isinstance(row, dict):
        raise TypeError(f"a JSON object a line, not {json.dumps(row)[:80]}")
    key = next((name for name in _ID_FIELDS if name in row), None)
    if key is None or "answer" not in row:
        missing = " and ".join(f"'{name}'" for name, there in (("_id", key), ("answer", "answer" in row)) if not there)
        raise TypeError(f"no {missing}; its fields: {', '.join(map(repr, row)) or 'none'}")
    qid = row[key]
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise TypeError(f"its id is a string or a number, not {json.dumps(qid)[:80]}")
    return str(qid), [*_listed(row["answer"]), *_listed(row.get("answer_aliases"))]


def _listed(value: Any) -> list[Any]:
    """An answer field as a list of answers: a list as it is, one value as one answer, null as none."""
    if value is None:
        return []
    listed = list(value) if isinstance(value, list) else [value]
    if not all(a is None or (isinstance(a, (str, int, float)) and not isinstance(a, bool)) for a in listed):
        raise TypeError(f"an answer is a string or a list of strings, not {json.dumps(value)[:80]}")
    return listed


def flow_answers(metadata: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """``{qid: answer}`` from a flow result's per-query metadata (queries without an answer, or abstained on, left
    out: the no-answer text is no answer)."""
    found = {}
    for qid, values in metadata.items():
        answer = values.get(ANSWER_KEY) if isinstance(values, Mapping) and not values.get("abstained") else None
        if answer is not None:
            found[str(qid)] = answer if isinstance(answer, str) else json.dumps(answer)
    return found


def scores(prediction: str, gold: list[str]) -> tuple[float, float]:
    """(EM, F1) of one answer, each in [0, 1], the best over ``gold``; 0 when there is no gold answer."""
    if not gold:
        return 0.0, 0.0
    from torchmetrics.functional.text import squad

    found = squad({"prediction_text": prediction, "id": "q"},
                  {"answers": {"answer_start": [0] * len(gold), "text": gold}, "id": "q"})
    return float(found["exact_match"]) / 100.0, float(found["f1"]) / 100.0


def per_query(answers: Mapping[str, str], gold: Mapping[str, list[str]],
              qids: list[str]) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` over the evaluated qids that have a gold answer."""
    values: dict[str, dict[str, float]] = {m: {} for m in MEASURES}
    for qid in qids:
        if qid in gold:
            # Unanswered is 0: scored as "", it would match a gold answer that normalises to nothing ("The").
            em, f1 = scores(answers[qid], gold[qid]) if qid in answers else (0.0, 0.0)
            values["AnswerEM"][qid], values["AnswerF1"][qid] = em, f1
    return values


def present(per_query: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The answer measures that some flow of ``{flow: {measure: ...}}`` has."""
    return [m for m in MEASURES if any(m in by_measure for by_measure in per_query.values())]
