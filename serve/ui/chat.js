"use strict";
// The Chat tab: a conversation with a served language model or a flow that answers, streamed as it is written,
// which Stop ends.

let messages = [];

/** Where the tab's conversation is kept (the browser tab's session storage): a reload shows it again. */
const CHAT_STORE = "tessera.chat";

/** The conversation, chosen model and index as kept (empty when none is). */
function keptChat() {
  try {
    return JSON.parse(window.sessionStorage.getItem(CHAT_STORE)) || {};
  } catch (err) {
    return {}; // kept by another version of the page, or cut short: a new conversation
  }
}

let pendingMessage = null; // the message whose answer is being written: not in ``messages`` until answered

/** Keep the conversation for a reload of the page (the task chat's is read back from the service), and the
 * message being answered while its answer is written: a reload then would lose it. */
function keepChat() {
  window.sessionStorage.setItem(CHAT_STORE, JSON.stringify({messages, model: $("chat-model").value,
    index: $("chat-index").value, pending: pendingMessage}));
}

/** What the page says of a message whose answer a reload cut: it is back in the box. */
const RELOAD_CUT = "the page was reloaded before this message was answered: it is back in the box, to send again";

/** The conversation of before a reload, shown again; its model is chosen once the list has come. A message sent
 * and not answered yet is put back in the message box (it was lost with its answer), and the status says so. */
function restoreChat() {
  const kept = keptChat();
  messages = Array.isArray(kept.messages) ? kept.messages : [];
  if (typeof kept.index === "string") $("chat-index").value = kept.index;
  if (typeof kept.pending === "string" && kept.pending && !$("chat-input").value) {
    $("chat-input").value = kept.pending;
    $("chat-status").textContent = RELOAD_CUT;
  }
  renderChat();
}

/** What the Chat tab starts on: answers from the documents of the chosen index, not the bare model. */
const DEFAULT_CHAT = "rag";

async function loadChatModels() {
  const models = await call("GET", "v1/models");
  const select = $("chat-model");
  const chosen = select.value || keptChat().model; // before a reload, the model the conversation was with
  // a flow the service cannot run as it is (a benchmark's, needing a dataset) is listed, off, its reason its title
  const listed = models.data.filter((m) => (m.type === "chat" && m.status === "ready") || m.type === "flow");
  const ready = (m) => m.status === undefined || m.status === "ready";
  const label = (m) => (m.type === "flow" ? `${m.id} (flow${ready(m) ? "" : `, ${m.status}`})` : m.id);
  const why = (m) => (ready(m) ? null : inPageReason(m.reason || m.status));
  select.replaceChildren(...listed.map((m) => choice(m.id, label(m), why(m), {"data-type": m.type})));
  const usable = listed.filter(ready);
  // a first question is about the user's documents: the rag flow when it can run, else the first model
  const first = usable.find((m) => m.id === DEFAULT_CHAT) || usable[0];
  if (usable.some((m) => m.id === chosen)) select.value = chosen;
  else if (first) select.value = first.id;
  offerChatIndex();
}

/** What the page says beside the index box while a language model is chosen: the service answers a model with no
 * index (it refuses one), and the page sent none, so a chosen index seemed to ground a bare model's answer. */
const NO_INDEX_FOR_A_MODEL = "a model alone reads no index: choose a flow (rag) to answer from an index's documents";

/** Whether the chosen model or flow is a flow (the only kind a chat sends an index to). */
function chatIsFlow() {
  const chosen = $("chat-model").selectedOptions[0];
  return Boolean(chosen && chosen.dataset.type === "flow");
}

/** The index box as the chosen model or flow uses it: off, and saying why, for a language model; what was typed in
 * it is kept for a flow chosen again. */
function offerChatIndex() {
  const flow = chatIsFlow() || !$("chat-model").value; // no list yet: nothing is said
  $("chat-index").disabled = !flow;
  $("chat-index-why").textContent = flow ? "" : NO_INDEX_FOR_A_MODEL;
}

function renderChat(pending) {
  const turns = messages.flatMap((m) => [el("div", {class: `turn ${m.role}`}, el("pre", {dir: "auto"}, m.content),
    // a follow-up that a flow searched for with its conversation (query.contextualize) says so
    m.searched ? searchedLine("searched for", m.searched) : null,
    m.stopped ? el("div", {class: "searched"}, "stopped") : null),
  // under the turn, not in it: the turn holds what the model wrote
  ...(m.cut ? [el("div", {class: "turn-note cut"}, "(cut off at max_tokens: the answer may end mid-sentence)")] : []),
  ...(m.abstained ? [el("div", {class: "turn-note abstained"},
    "(no model call: no document found is as close to the question as the flow's min_relevance asks)")] : []),
  // a flow's answer that cites none of the documents it was given says so, in the Search tab's words
  ...(m.uncited ? [el("div", {class: "turn-note uncited"}, "no sources cited")] : [])]);
  if (pending !== undefined) {
    turns.push(el("div", {class: "turn assistant pending"}, el("pre", {dir: "auto"}, pending || "…")));
  }
  keepingInView($("chat-input"), () => $("chat-log").replaceChildren(...turns));
}

/** POST /v1/chat/completions with stream: true; calls onText with the reply so far as its chunks arrive, and
 * returns {text, searched, stopped, cut, abstained, unanswered, uncited} (searched: what a flow searched for, when
 * it made a follow-up stand alone; stopped: ``signal`` stopped it, and text is what was written until then; cut: the
 * model stopped at its max_tokens, finish_reason "length", as the Search tab says of an answer; abstained: a flow's
 * answer step found no document close enough to answer from, and no model wrote the text; unanswered: the flow
 * wrote no answer, and the text says why, and lists no sources; uncited: a flow's answer that cites none of the
 * documents it was given). */
async function streamChat(body, onText, signal) {
  let text = "";
  let searched = "";
  let cut = false;
  let abstained = false;
  let unanswered = false;
  let sources = null; // a flow's cited sources, in its last event (a model alone sends none)
  let documents = null; // how many documents a flow found: none for an answer from the question alone (answer_only)
  try {
    await readEvents(await openStream("POST", "v1/chat/completions", body, signal), (chunk) => {
      const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
      if (delta && delta.content) {
        text += delta.content;
        onText(text);
      }
      if (delta && delta.standalone_query) searched = delta.standalone_query;
      if (delta && delta.abstained) abstained = true;
      if (delta && delta.answered === false) unanswered = true;
      if (delta && Array.isArray(delta.sources)) sources = delta.sources;
      if (delta && typeof delta.documents === "number") documents = delta.documents;
      if (chunk.choices && chunk.choices[0] && chunk.choices[0].finish_reason === "length") cut = true;
    });
  } catch (err) {
    if (!signal.aborted) throw err;
    return {text, searched, stopped: true, cut, abstained, unanswered};
  }
  // uncited: a flow's answer that cites none of its documents (not a declined one, nor one that is no answer, nor
  // one written from no documents)
  const uncited = Boolean(sources && !sources.length && !abstained && !unanswered && documents !== 0);
  return {text, searched, stopped: false, cut, abstained, unanswered, uncited};
}

/** What the browser says of a message of only spaces, refused (requireText). */
const BLANK_MESSAGE = "Type a message.";

let chatStopper = null; // the AbortController of the answer being written, while one is
let leavingPage = false; // the page is being left (a reload): its answer's fetch ends, and the message stays kept

/** Send off while an answer is written, Stop on. */
function setChatBusy(busy) {
  $("chat-send").disabled = busy;
  $("chat-stop").hidden = !busy;
}

/** Stops the answer being written (the Stop button); what it wrote so far stays. */
function stopChat() {
  if (chatStopper) chatStopper.abort();
}

async function sendChat(event) {
  event.preventDefault();
  const input = $("chat-input");
  const content = input.value.trim();
  if (chatStopper) return; // Send is off while an answer is written
  if (!content) { // the box's own check refuses it first (requireText): said, not a submit that does nothing
    requireText(input, BLANK_MESSAGE);
    input.reportValidity();
    return;
  }
  const conversation = messages; // "New chat" or another key replaces it: a late reply then goes nowhere
  pendingMessage = content; // a reload while it is answered puts it back in the box
  keepChat();
  conversation.push({role: "user", content});
  input.value = "";
  renderChat("");
  const stopper = new AbortController();
  chatStopper = stopper;
  setChatBusy(true);
  const stopTicking = ticking($("chat-status"), "answering…");
  try {
    const body = {model: $("chat-model").value, stream: true,
      // a reply that is no answer ("No answer could be written (...)") is shown, not sent back: the follow-up
      // was searched for with that text in it (the task chat leaves it out too)
      messages: conversation.filter((m) => !m.unanswered).map((m) => ({role: m.role, content: m.content}))};
    const index = $("chat-index").value.trim();
    if (index && chatIsFlow()) body.index = index; // a model alone reads no index (the box is off, and says so)
    const reply = await guarded(() => streamChat(body, renderChat, stopper.signal)
      .catch(namingTheIndexRule(body.index)), // as the Search tab words a refused index
    {focus: {fields: {index: "chat-index", model: "chat-model"}, fallback: "chat-input"}});
    if (conversation !== messages || leavingPage) return; // (leaving: kept as pending, for the reloaded page)
    pendingMessage = null;
    if (reply === undefined || (reply.stopped && !reply.text)) {
      conversation.pop(); // refused (the error is shown) or stopped unanswered: not part of the conversation,
      if (!input.value) input.value = content; // and the message is back in the box to send again
    } else {
      conversation.push({role: "assistant", content: reply.text, searched: reply.searched, stopped: reply.stopped,
        cut: reply.cut, abstained: reply.abstained, unanswered: reply.unanswered, uncited: reply.uncited});
      announce(`answer: ${reply.text}`); // the log is drawn again at every piece of it: not a live region
    }
    keepChat();
    renderChat();
  } finally {
    stopTicking();
    $("chat-status").textContent = "";
    chatStopper = null;
    setChatBusy(false);
    if (focusLost()) $("chat-input").focus(); // Send was off, or Stop pressed and gone
  }
}

/** A new conversation: the answer being written is stopped, and the turns and the error of the last one are gone
 * (the alert and its field's aria-invalid stayed until some other action). */
function newChat() {
  stopChat();
  showError("");
  messages = [];
  pendingMessage = null;
  keepChat();
  renderChat();
}
