"""``POST /v1/chat/completions``: OpenAI's chat API for the language models this app serves.

``chat_target`` is the one place where a request's ``model`` is matched: a served
language model (an entry of ``args.llms``, by name or alias) goes to its deployment, a
flow that answers (``rag``) runs in this replica (serve/chat/chat_flows.py); any other name is
a 404 in OpenAI's shape naming the model and listing both kinds.

The body is validated here (a bad field is a 422 naming it), then handed to the
deployment as a dict; its answer comes back as an async generator (serve/deployments/llm.py),
returned whole or as server-sent events (FastAPI's ``StreamingResponse``). The checks of the
fields Cohere's body shares are serve/chat/chat_fields.py's; the answer's way to the client
(``opened``, ``whole_answer``, ``sse``, ``model_failure``) is serve/chat/chat_answer.py's. Both are
imported here, so ``serve.chat.chat``'s names hold.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from flows import store as flow_store
from flows.spec import FlowSpec
from operators.conversation import content_text
from operators.errors import one_line
from operators.json_tree import json_kind
from serve.chat.chat_answer import Opened, model_failure, opened, sse, whole_answer  # noqa: F401 (re-exported)
from serve.chat.chat_fields import StreamOptions, check_stop, no_logprobs, text_answers_only
from serve.http.errors import ApiError
from serve.http.event_stream import EventStream
from serve.schemas import ModelCard, check_texts


class ChatMessage(BaseModel):
    """One message; ``content`` is text, or OpenAI's list of ``{"type": "text", "text"}`` parts (an assistant's also
    ``{"type": "refusal", "refusal"}`` parts, as OpenAI's API takes them: what it said that turn)."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        refusal = (self.model_extra or {}).get("refusal")  # OpenAI's answer replayed: a refusal, its content null
        if self.content is None and self.role == "assistant" and isinstance(refusal, str):
            return refusal
        if isinstance(self.content, list):  # a refusal part's text is the assistant's turn, as a text part's
            return content_text([{"type": "text", "text": p.get("refusal")} if p.get("type") == "refusal" else p
                                 for p in self.content], sep="")
        return content_text(self.content, sep="")


def text_only(messages: list[ChatMessage]) -> None:
    """A 400 naming the first content part that is not text (``image_url``, ``input_audio``, ``file``): the models
    here read text, so such a part would be dropped without a word. OpenAI answers it with a 400 for a text-only
    model; so does this, raised from the body's validation as an ``ApiError`` (a ``ValueError`` would be a 422).
    An assistant message's refusal part (OpenAI's, replayed in the history) is text; another role's is refused."""
    for i, message in enumerate(messages):
        if message.content == [] or (message.content is None and message.role != "assistant"):  # read as ""
            got = "an empty list" if message.content == [] else "none"
            raise ApiError(422, f"messages[{i}].content: a {message.role} message needs content, a string or a list "
                           f"of text parts; got {got}", param=f"messages[{i}].content", code="invalid_value")
        for j, part in enumerate(message.content if isinstance(message.content, list) else []):
            if "type" not in part:  # OpenAI refuses it; read as text, an image part without its type was dropped
                raise ApiError(422, f"messages[{i}].content[{j}].type: a content part names its type; send "
                               "{\"type\": \"text\", \"text\": ...}", param=f"messages[{i}].content[{j}].type",
                               code="invalid_value")
            kind = part["type"]
            if not isinstance(kind, str):  # null, 5, ["text"]: was "'None' content is not supported", a 400
                raise ApiError(422, f"messages[{i}].content[{j}].type: a content part's type is a string, not "
                               f"{json_kind(kind)}; send {{\"type\": \"text\", \"text\": ...}}",
                               param=f"messages[{i}].content[{j}].type", code="invalid_value")
            if kind == "text" and not isinstance(part.get("text"), str):  # it was read as "" or as str(5)
                said = f"is {json_kind(part['text'])}, not a string" if "text" in part else "is missing"
                raise ApiError(422, f"messages[{i}].content[{j}].text: a text part's text {said}",
                               param=f"messages[{i}].content[{j}].text", code="invalid_value")
            if kind == "refusal" and message.role == "assistant":
                if not isinstance(part.get("refusal"), str):
                    said = f"is {json_kind(part['refusal'])}, not a string" if "refusal" in part else "is missing"
                    raise ApiError(422, f"messages[{i}].content[{j}].refusal: a refusal part's refusal {said}",
                                   param=f"messages[{i}].content[{j}].refusal", code="invalid_value")
                continue
            if kind == "refusal":
                raise ApiError(400, f"messages[{i}].content[{j}].type: a 'refusal' part is an assistant message's "
                               f"only, not a {message.role} message's; send {{\"type\": \"text\", \"text\": ...}} "
                               "parts", param=f"messages[{i}].content[{j}].type", code="invalid_value")
            if kind != "text":
                raise ApiError(400, f"messages[{i}].content[{j}].type: '{kind}' content is not supported: the models "
                               "here read text only; send {\"type\": \"text\", \"text\": ...} parts",
                               param=f"messages[{i}].content[{j}].type", code="invalid_value")


#: Fields checked here (refused unless empty) and not passed on.
NOT_ENGINE_FIELDS = ("tools", "tool_choice", "functions", "function_call", "response_format", "logprobs",
                     "top_logprobs", "logit_bias", "modalities", "audio", "web_search_options")


#: OpenAI's bound on ``stop``: up to 4 sequences.
MAX_STOP = 4
#: Choices one request may ask for (``n``): a llama.cpp replica writes them one after another.
MAX_CHOICES = 8


class ChatRequest(BaseModel):
    """OpenAI's chat-completions body: the fields the engines use; the client's other fields are ignored. Numbers
    and booleans are strict, as OpenAI's are (``max_tokens: "3"`` is refused, not read as 3); a number is finite
    (Python's JSON reads ``NaN``, which a bound's check let through as "less than or equal to 2")."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    model: str = Field(min_length=1, description="A served language model or a flow that answers, such as "
                       "'rag' (GET /v1/models lists both).")
    messages: list[ChatMessage] = Field(min_length=1, description="The conversation, oldest first.")
    stream: bool = Field(False, strict=True, description="Answer as server-sent events, token by token.")
    stream_options: StreamOptions | None = Field(None, description="With `stream`: `include_usage` adds a last "
                                                 "event with the token usage and no choices.")
    temperature: float | None = Field(None, ge=0, le=2, strict=True)
    top_p: float | None = Field(None, gt=0, le=1, strict=True)
    max_tokens: int | None = Field(None, gt=0, strict=True)
    max_completion_tokens: int | None = Field(None, gt=0, strict=True)
    stop: str | list[str] | None = Field(None, description=f"Up to {MAX_STOP} sequences (OpenAI's bound); served "
                                         "models only: a flow's answer takes none.")
    seed: int | None = Field(None, ge=-2**63, le=2**63 - 1, strict=True, description="A 64-bit integer, as OpenAI's.")
    presence_penalty: float | None = Field(None, ge=-2, le=2, strict=True)
    frequency_penalty: float | None = Field(None, ge=-2, le=2, strict=True)
    n: int = Field(1, ge=1, le=MAX_CHOICES, strict=True, description=f"Choices to write, up to {MAX_CHOICES}: a served "
                   "model writes each in turn (a seed, where given, is the first choice's; the next get seed + 1, "
                   "...); a flow searches once and answers n times from what it found.")
    index: str | None = Field(None, description="Flows only (not OpenAI's): the index to search, a name under "
                              "the service's index folders; default: the app's default index.")
    params: dict[str, Any] | None = Field(None, description="Flows only (not OpenAI's): steps' params for this "
                                          "answer, named STEP.PARAM (`{\"top.k\": 3}`), as /v1/search takes them.")
    tools: Any = Field(None, description="Refused when given: the models answer in text and call no tools.")
    tool_choice: Any = Field(None, description="Refused when given, as `tools`.")
    functions: Any = Field(None, description="Refused when given, as `tools`.")
    function_call: Any = Field(None, description="Refused when given, as `tools`.")
    response_format: dict[str, Any] | None = Field(None, description="Only {'type': 'text'}.")
    logprobs: bool | None = Field(None, strict=True, description="Refused when true: no log probabilities here.")
    top_logprobs: int | None = Field(None, ge=0, le=20, strict=True, description="Refused above 0, as `logprobs`.")
    logit_bias: dict[str, Any] | None = Field(None, description="Refused unless empty: its keys are token ids of "
                                              "OpenAI's tokenizers, which no model here reads.")
    modalities: list[str] | None = Field(None, description="Only [\"text\"]: the answer is text.")
    audio: Any = Field(None, description="Refused when given: the answer is text, never audio.")
    web_search_options: Any = Field(None, description="Refused when given: the models search no web (a flow such "
                                    "as 'rag' searches its index).")
    user: str | None = Field(None, strict=True, description="Accepted, not used (OpenAI's end-user id): a string, "
                             "as OpenAI's API takes it (`5` is a 422 naming it; it was ignored).")

    @field_validator("stream", "n", mode="before")
    @classmethod
    def _null_is_the_default(cls, value: Any, info: ValidationInfo) -> Any:
        """OpenAI's API takes null for these as their default (its spec: "boolean or null", "integer or null"), and
        the openai client sends ``n=None`` as null: it was a 422."""
        return cls.model_fields[info.field_name].default if value is None else value

    @field_validator("messages")
    @classmethod
    def _text(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        text_only(messages)
        check_texts([m.text() for m in messages], "message")
        return messages

    @field_validator("stop")
    @classmethod
    def _up_to_four(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences, as OpenAI's API takes; got {len(value)}")
        return check_stop(value)

    @field_validator("tools", "tool_choice", "functions", "function_call")
    @classmethod
    def _no_tools(cls, value: Any, info: ValidationInfo) -> Any:
        """Fields that ask for another kind of answer are refused, not ignored: the client would wait for a tool
        call or JSON that never comes. Its fields that change nothing here (``user``, ``store``...) are ignored."""
        if value and value != "none":
            raise ValueError(f"{info.field_name} is not supported: these models answer in text and call no tools")
        return value

    @field_validator("logprobs", "top_logprobs")
    @classmethod
    def _no_logprobs(cls, value: Any, info: ValidationInfo) -> Any:
        return no_logprobs(value, info.field_name)

    @field_validator("response_format")
    @classmethod
    def _text_answers(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return text_answers_only(value)

    @field_validator("logit_bias")
    @classmethod
    def _no_logit_bias(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """Refused, not ignored (it was): a bias of -100 bans a token, and the answer would still hold it; the ids
        are OpenAI's tokenizer's, another vocabulary than the served models'."""
        if value:
            raise ValueError("logit_bias is not supported: its token ids are OpenAI's tokenizer's, not the served "
                             "models'; leave it out")
        return value

    @field_validator("modalities")
    @classmethod
    def _text_modality(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and value != ["text"]:  # audio asked for, a text answer would come without a word
            raise ValueError(f"only [\"text\"] is supported: the answer is text; got {value}")
        return value

    @field_validator("audio")
    @classmethod
    def _no_audio(cls, value: Any) -> None:
        if value is not None:
            raise ValueError("audio output is not supported: the answer is text; leave it out")
        return None

    @field_validator("web_search_options")
    @classmethod
    def _no_web_search(cls, value: Any) -> None:
        """Refused, not ignored: the client would wait for an answer from the web, with its url citations."""
        if value is not None:
            raise ValueError("web_search_options is not supported: these models search no web and answer without "
                             "url citations; leave it out (a flow such as 'rag' searches its index)")
        return None

    def engine_body(self) -> dict[str, Any]:
        """What the deployment gets: messages as plain text, options that were given."""
        body = self.model_dump(exclude_none=True, exclude={"messages", "n", "index", "user", *NOT_ENGINE_FIELDS})
        body["messages"] = [{"role": "system" if m.role == "developer" else m.role, "content": m.text()}
                            for m in self.messages]
        if self.n > 1:
            body["n"] = self.n
        return body


def chat_target(model: str, by_name: dict[str, ModelCard], tenant: str) -> ModelCard | FlowSpec:
    """Where a chat request for ``model`` goes: a served language model's card, or the spec of a flow that
    answers (the caller's saved flows included); else a 404 naming it."""
    from serve.chat import chat_flows

    card = by_name.get(model)
    if card is not None and card.type == "chat":
        if card.status == "missing":
            raise ApiError(404, f"model '{model}' is configured but not deployed: {card.reason}", param="model",
                           code="model_not_found")
        return card
    spec = None if card is not None else chat_flows.find_flow(model, tenant)
    if spec is not None:
        return spec
    served = sorted({c.id for c in by_name.values() if c.type == "chat" and c.status != "missing"})  # once each
    flows = [c.id for c in chat_flows.flow_cards(tenant) if c.status != "missing"]  # what /v1/models offers
    hint = flow_store.did_you_mean(model, served + flows)
    raise ApiError(404, f"model '{one_line(model, 60)}' is neither a language model served here nor a flow that "
                   f"answers{hint}; "
                   f"served: {', '.join(served) or 'none'}; flows: {', '.join(flows) or 'none'}", param="model",
                   code="model_not_found")


async def chat_response(handle: Any, card: ModelCard, request: ChatRequest) -> Any:
    """The deployment's answer as OpenAI's body, or a ``StreamingResponse`` of its events."""
    events = engine_events(handle, card, request)
    if not request.stream:
        return await whole_answer(events, card)
    return EventStream(sse(await opened(events, card), card))


def engine_events(handle: Any, card: ModelCard, request: ChatRequest) -> Any:
    """The deployment's answer to ``request``: an async generator of its events (one, the whole answer, unstreamed)."""
    check_size(request)
    check_max_tokens(card, request)
    check_no_flow_fields(card, request)
    body = request.engine_body()
    if card.engine == "vllm":
        from serve.deployments.llm import vllm_request

        body = vllm_request(body)
    return handle.options(stream=True).chat.remote(body)


def check_no_flow_fields(card: ModelCard, request: ChatRequest) -> None:
    """A 422 naming ``index``, or ``params`` (not empty), sent with a language model alone: they are a flow's, and
    were dropped without a word, so a client that meant a grounded answer (or a step's setting) got a bare one."""
    if request.index is not None:
        raise ApiError(422, f"index: '{card.id}' is a language model, which reads no index; a flow that answers "
                       "searches one (rag; GET /v1/models lists both)", param="index", code="invalid_value")
    if request.params:
        raise ApiError(422, f"params: '{card.id}' is a language model, which runs no flow's steps to set params of; a "
                       "flow that answers takes them (rag; GET /v1/models lists both)", param="params",
                       code="invalid_value")


def check_size(request: ChatRequest) -> None:
    """A 400 naming ``messages`` for a conversation over ``max_chat_chars`` (the service's; the default in an app that
    serves models only), before the model tokenises it: llama.cpp read a 600 KB message before it said that the
    message did not fit its context."""
    from serve import service as svc
    from serve.service_settings import Limits

    limit = (svc.current().limits if svc.configured() else Limits()).max_chat_chars
    total = sum(len(m.text()) for m in request.messages)
    if total > limit:
        raise ApiError(400, f"messages: {total} characters in all, over the limit max_chat_chars={limit}; send a "
                       "shorter message or start a new conversation", param="messages", code="max_chat_chars")


def check_max_tokens(card: ModelCard, request: ChatRequest) -> None:
    """A 422 naming ``max_tokens`` (or ``max_completion_tokens``) above the model's context window, where the config
    says it (``ModelCard.context_window``): llama.cpp loads every model with 4,096 tokens and bounded a reply by it
    without a word (``max_tokens: 10**9`` was a 200); a vLLM engine's is its ``max_model_len``. A vLLM model
    configured without one has the model's own length, which only its engine knows, and which refuses more itself."""
    window = card.context_window
    if window is None:
        return
    for field in ("max_tokens", "max_completion_tokens"):
        asked = getattr(request, field)
        if asked is not None and asked > window:
            raise ApiError(422, f"{field}: {asked} tokens is more than model '{card.id}' can write: its context "
                           f"window holds {window} tokens, the messages' included; ask for {window} at most",
                           param=field, code="invalid_value")
