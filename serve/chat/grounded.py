"""Answers grounded on documents sent with the request: Cohere's ``documents`` in ``POST /v2/chat``.

The documents take the place of retrieval. They become the question's rows, ranked as sent
(``docno``: the document's ``id``, else ``doc:N``; ``title`` and ``text`` from its ``data``), and
go through the answer path: ``generate.context``, ``generate.answer`` and ``generate.references``.
With a flow that answers (``rag``) as the model, the path is that flow's own steps, with their
params (the answer's style and model, the context's length). With a served language model, it is
the operators' defaults, the answer asked of the gateway alias that the model answers to, on the
model's deployment. Citations then name the documents sent, with their data.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flows.spec import FlowSpec, Placement, StepSpec
from serve import service as svc
from serve.http.errors import ApiError
from operators.unicode import blank, unicode_problem
from serve.schemas import ModelCard

#: The steps of the answer path, in order, by their ids in the flow built here.
ANSWER_PATH = {"context": "generate.context", "answer": "generate.answer", "references": "generate.references"}
#: Where a document's text is found in its ``data``; without any of them, its fields are the text.
TEXT_FIELDS = ("text", "snippet", "content", "body")


class CohereDocument(BaseModel):
    """One of Cohere's documents: its fields in ``data``, an optional ``id`` that citations name."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, min_length=1, description="What citations call the document; default doc:N.")
    data: dict[str, Any] = Field(min_length=1, description="Its fields: text (or snippet, content, body), title, "
                                 "url and any others.")


def document_rows(documents: list[str | CohereDocument]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The question's rows (``docno``, ``title``, ``text``, ``url``) and each document as citations show it, by
    docno; a document without text, or an id given twice, is a 422 naming it."""
    rows, shown = [], {}
    for n, document in enumerate(documents):
        if isinstance(document, str):
            docno, data = f"doc:{n}", {"text": document}
        else:
            docno, data = document.id or f"doc:{n}", document.data
        if docno in shown:
            raise ApiError(422, f"documents.{n}.id: '{docno}' is the id of an earlier document",
                           param=f"documents.{n}.id", code="invalid_value")
        given = [key for key in TEXT_FIELDS if data.get(key) is not None]
        # in JSON's words, as the fallback's values are: str() gave {"a": 1} as {'a': 1} and true as True
        text = next((_plain(data[key]) for key in given if data[key] != ""), "" if given else None)
        if text is None:  # no text field at all (an empty one is no text: a 422, not "text: ")
            text = "\n".join(f"{key}: {_plain(value)}" for key, value in data.items() if key not in ("title", "url"))
        if blank(text):  # a NUL or a zero-width space alone too, as a search's query (str.strip keeps them)
            raise ApiError(422, f"documents.{n} has no text", param=f"documents.{n}", code="invalid_value")
        row = {"docno": docno, "title": _plain(data["title"]) if data.get("title") else None, "text": text,
               "url": _plain(data["url"]) if data.get("url") else None}
        for field, value in row.items():
            problem = unicode_problem(value) if value else None
            if problem:
                raise ApiError(422, f"documents.{n}: its {field} {problem}", param=f"documents.{n}",
                               code="invalid_value")
        rows.append(row)
        shown[docno] = {"id": docno, **data}
    return rows, shown


def answer_path(target: ModelCard | FlowSpec) -> FlowSpec:
    """The flow that answers from the documents (see the module): the target flow's answer path, or the defaults
    with the served model's gateway alias placed on its deployment."""
    if isinstance(target, FlowSpec):
        from serve.chat.chat_flows import step_operators

        found: dict[str, StepSpec] = {}
        for step_id, cls in step_operators(target).items():
            found.setdefault(cls.name, target.steps[step_id])
        steps = {step_id: found.get(op, StepSpec(op=op)).model_copy(update={"inputs": None})
                 for step_id, op in ANSWER_PATH.items()}
        steps["answer"] = _without_relevance_gate(steps["answer"])
        return FlowSpec(name=f"{target.name}_documents", steps=steps)
    answer = StepSpec(op=ANSWER_PATH["answer"], params={"model": gateway_alias(target)},
                      placement=Placement(deployment=target.deployment, app=svc.current().app_name))
    return FlowSpec(name=f"{target.id}_documents", steps={step_id: answer if step_id == "answer" else StepSpec(op=op)
                                                          for step_id, op in ANSWER_PATH.items()})


def _without_relevance_gate(answer: StepSpec) -> StepSpec:
    """The answer step without ``min_relevance``: the documents sent are the ones to answer from, and they carry no
    search's score to gate on."""
    params = {key: value for key, value in (answer.params or {}).items() if key != "min_relevance"}
    return answer.model_copy(update={"params": params})


def gateway_alias(card: ModelCard) -> str:
    """The name among a served model's name and aliases that the LLM gateway knows (``local`` for smollm2)."""
    from operators.llm.aliases import aliases

    known = aliases()
    for name in [card.id, *card.aliases]:
        if name in known:
            return name
    raise ApiError(422, f"documents: model '{card.id}' answers to no alias of the language-model gateway "
                   f"({', '.join(sorted(known))}), so no flow can answer from documents with it; ask a flow that "
                   "answers, such as rag", param="documents", code="invalid_value")


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
