"use strict";
// Tessera's web UI. Every action is one call of the service's HTTP API (docs/serving.md), sent with the
// API key typed at the top; text from the service is put in the page as text, never as HTML.

const KEY_STORE = "tessera.apiKey";
const ROOT = new URL("..", window.location.href); // the app's root: the page lives at <root>/ui/
const POLL_MS = 700;
const $ = (id) => document.getElementById(id);

// -- the API ------------------------------------------------------------------------------------------

class ApiError extends Error {}
/** A refusal of a key the user has since replaced: a late answer to a request sent before the new key was
 * typed. Not shown, or it would overwrite what the new key's requests show. */
class StaleKeyError extends Error {}

const typedKey = () => $("api-key").value.trim();

/** Throws the refusal of ``response`` (its ``payload``), or a StaleKeyError when it refused an older key. */
function refuse(response, payload, sentKey) {
  if (response.status === 401 && typedKey() !== sentKey) throw new StaleKeyError();
  throw new ApiError(describe(response.status, payload));
}

function headers(json) {
  const result = {};
  const key = typedKey();
  if (key) result.Authorization = `Bearer ${key}`;
  if (json) result["Content-Type"] = "application/json";
  return result;
}

/** The service's error body (OpenAI's shape) as one line that names the field. */
function describe(status, payload) {
  const error = payload && payload.error;
  if (!error) return `HTTP ${status}: ${typeof payload === "string" ? payload : JSON.stringify(payload)}`;
  const field = error.param ? ` (field: ${error.param})` : "";
  return `HTTP ${status}${field}: ${error.message}`;
}

async function send(method, path, body) {
  const form = body instanceof FormData; // files: the browser writes the multipart body and its Content-Type
  try {
    return await fetch(new URL(path, ROOT), {
      method, headers: headers(body !== undefined && !form),
      body: body === undefined || form ? body : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError(`the service did not answer (${err.message})`);
  }
}

async function call(method, path, body) {
  const sentKey = typedKey();
  const response = await send(method, path, body);
  const type = response.headers.get("content-type") || "";
  const payload = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) refuse(response, payload, sentKey);
  return payload;
}

// -- small helpers ------------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

/** Runs an action, showing its error (if any) in the alert box instead of losing it in the console. A user's
 * action clears the previous error first; a background refresh (``clear: false``) leaves it to be read. */
async function guarded(action, {clear = true} = {}) {
  if (clear) showError("");
  try {
    return await action();
  } catch (err) {
    if (err instanceof StaleKeyError) return undefined;
    showError(err instanceof ApiError ? err.message : `unexpected: ${err.message}`);
    return undefined;
  }
}

function table(columns, rows, cell) {
  return el("table", {},
    el("thead", {}, el("tr", {}, ...columns.map((c) => el("th", {}, c)))),
    el("tbody", {}, ...rows.map((row) => el("tr", {}, ...columns.map((c) => el("td", {}, cell(row, c)))))));
}

function hitCell(hit, column) {
  const value = hit[column];
  if (value === null || value === undefined) return "";
  if (column === "score") return Number(value).toFixed(4);
  if (column === "text") return el("span", {title: value}, value.length > 280 ? `${value.slice(0, 280)}…` : value);
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function hitTable(hits) {
  const manyQueries = new Set(hits.map((h) => h.qid)).size > 1; // a task's rows: say which query each is for
  const columns = [...(manyQueries ? ["qid"] : []), "rank", "docno", "title", "score", "text"]
    .filter((c) => hits.some((h) => h[c] !== undefined));
  const result = table(columns, hits, hitCell);
  result.className = "hits";
  return result;
}

// -- tabs ---------------------------------------------------------------------------------------------

const onShow = {
  tasks: () => refreshTasks(), models: () => loadModels(), chat: () => loadChatModels(), flows: () => loadFlowList(),
  indices: () => loadIndices(),
};

function showTab(name) {
  for (const button of document.querySelectorAll("nav button")) {
    button.setAttribute("aria-selected", String(button.dataset.tab === name));
  }
  for (const section of document.querySelectorAll("main section")) section.hidden = section.id !== `tab-${name}`;
  if (onShow[name]) guarded(onShow[name]);
}

// -- the service's state ------------------------------------------------------------------------------

async function checkHealth() {
  const badge = $("health");
  const response = await send("GET", "healthz").catch(() => null);
  if (!response) {
    badge.textContent = "not reachable";
    badge.className = "badge bad";
    return;
  }
  const body = await response.json().catch(() => ({}));
  const waiting = Object.entries(body.models || {}).filter(([, state]) => state !== "ready").map(([name]) => name);
  badge.textContent = response.ok ? "ready" : `starting: ${waiting.join(", ") || response.status}`;
  badge.className = response.ok ? "badge ok" : "badge wait";
}

/** The search tab's flow choice (``flows``: a listing already fetched, else GET /flows). */
async function loadFlows(flows) {
  flows = flows || await call("GET", "flows");
  const select = $("flow");
  const chosen = select.value || "hybrid";
  select.replaceChildren(
    el("optgroup", {label: "built-in"}, ...flows.builtin.map((name) => el("option", {value: name}, name))),
    ...(flows.saved.length ? [el("optgroup", {label: "saved"},
      ...flows.saved.map((name) => el("option", {value: name}, name)))] : []));
  select.value = [...flows.builtin, ...flows.saved].includes(chosen) ? chosen : flows.builtin[0];
  await describeFlow();
}

/** The chosen flow's description and steps, under the form. */
async function describeFlow() {
  const spec = await call("GET", `flows/${encodeURIComponent($("flow").value)}`);
  const steps = Object.entries(spec.steps).map(([id, step]) => (id === step.op ? id : `${id} (${step.op})`));
  $("flow-description").textContent = `${spec.description || ""} Steps: ${steps.join(", ")}`.trim();
}

async function loadModels() {
  const models = await call("GET", "v1/models");
  const body = $("model-table").tBodies[0];
  body.replaceChildren(...models.data.map((m) => el("tr", {},
    el("td", {}, m.id), el("td", {}, m.type || ""), el("td", {}, m.status || ""), el("td", {}, m.reason || ""))));
}

// -- search -------------------------------------------------------------------------------------------

function flowBody() {
  const queries = $("queries").value.split("\n").map((q) => q.trim()).filter(Boolean);
  const body = {flow: $("flow").value};
  if (queries.length === 1) body.query = queries[0];
  else body.queries = queries;
  const index = $("index").value.trim();
  if (index) body.index = index;
  return body;
}

/** Each source docno as its row's title and docno, where ``rows`` has the row. */
function sourceNames(sources, rows) {
  const titles = new Map(rows.map((row) => [row.docno, row.title]));
  return sources.map((docno) => (titles.get(docno) ? `${titles.get(docno)} (${docno})` : docno));
}

/** An answer and its sources: ``items`` each source's text, numbered by the list, or (``numbered``) with the
 * numbers the answer cites them by already in the text. */
function answerView(answer, items, degraded, numbered = false) {
  const list = el(numbered ? "ul" : "ol", {class: "sources"}, ...items.map((item) => el("li", {}, item)));
  return el("div", {class: "answer"},
    el("p", {}, el("strong", {}, "Answer: "), answer || "(no answer)"),
    items.length ? list : el("p", {class: "status"}, "no sources cited"),
    degraded ? el("p", {class: "status"}, `degraded: ${JSON.stringify(degraded)}`) : null);
}

/** A search's answer: its sources as the flow's references when it has them ("[4] Title (PDF, file.pdf, p. 2)",
 * numbered as the answer cites them), else by title and docno. */
function answerBlock(metadata, hits) {
  if (typeof metadata.answer !== "string") return null;
  const references = Array.isArray(metadata.references) ? metadata.references.map(String) : [];
  if (references.length) return answerView(metadata.answer, references, metadata.degraded, true);
  return answerView(metadata.answer, sourceNames(metadata.sources || [], hits), metadata.degraded);
}

function renderResults(results) {
  $("results").replaceChildren(...results.map((r) => {
    const metadata = r.metadata || {};
    return el("article", {class: "result", "data-qid": r.qid},
      el("h2", {}, r.query),
      answerBlock(metadata, r.hits),
      r.hits.length ? hitTable(r.hits) : el("p", {class: "status"}, "no hits"),
      Object.keys(metadata).length
        ? el("details", {}, el("summary", {}, "metadata"), el("pre", {}, JSON.stringify(metadata, null, 2)))
        : null);
  }));
}

async function search(event) {
  event.preventDefault();
  const body = flowBody();
  const topK = $("top-k").value.trim();
  if (topK !== "") body.top_k = Number(topK);
  const button = $("search-button");
  button.disabled = true;
  $("search-status").textContent = `running ${body.flow}…`;
  try {
    const answer = await guarded(() => call("POST", "v1/search", body));
    if (!answer) {
      $("search-status").textContent = "";
      return;
    }
    const ms = answer.took_ms;
    const took = ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
    const count = `${answer.results.length} ${answer.results.length === 1 ? "query" : "queries"}`;
    $("search-status").textContent = `${answer.flow}: ${count} in ${took}`;
    renderResults(answer.results);
  } finally {
    button.disabled = false;
  }
}

async function enqueue() {
  if (!$("search-form").reportValidity()) return;
  const taskId = await guarded(() => call("POST", "task/enqueue", flowBody()));
  if (taskId) {
    showTab("tasks");
    followTask(taskId);
  }
}

// -- tasks --------------------------------------------------------------------------------------------

let followed = null; // the task whose progress is shown

async function refreshTasks() {
  const listing = await call("GET", "tasks");
  $("task-counts").textContent = Object.entries(listing.counts).map(([state, n]) => `${n} ${state}`).join(", ")
    || "no tasks yet";
  const rows = [...listing.tasks].reverse();
  $("task-table").tBodies[0].replaceChildren(...rows.map((task) => {
    const unfinished = task.status === "queued" || task.status === "running";
    return el("tr", {"data-task": task.id},
      el("td", {}, el("button", {type: "button", class: "link", onclick: () => followTask(task.id)}, task.id)),
      el("td", {}, task.flow || ""), el("td", {class: `state ${task.status}`}, task.status),
      el("td", {}, task.steps_done ?? ""), el("td", {}, when(task.created)),
      el("td", {}, unfinished ? el("button", {type: "button", onclick: () => cancelTask(task.id)}, "cancel") : ""));
  }));
}

const pause = () => new Promise((resolve) => setTimeout(resolve, POLL_MS));

/** A stored time (seconds since the epoch) in the browser's locale. */
function when(seconds) {
  return typeof seconds === "number" ? new Date(seconds * 1000).toLocaleString() : String(seconds || "");
}

async function cancelTask(taskId) {
  await guarded(() => call("GET", `task/cancel/${encodeURIComponent(taskId)}`));
  await guarded(refreshTasks, {clear: false});
}

function renderProgress(body) {
  const progress = body.progress;
  const steps = Object.entries(progress.step_progress || {}).map(([step, info]) =>
    el("li", {}, `${step}: ${info && info.status ? info.status : JSON.stringify(info)}`));
  const rows = body.result ? body.result.data : [];
  $("task-detail").replaceChildren(el("article", {class: "result", "data-task": body.task_id},
    el("h2", {}, `task ${body.task_id}: ${body.status}`),
    el("progress", {max: 100, value: progress.pipeline_percentage}),
    el("span", {class: "status"}, ` ${progress.pipeline_progress} steps`),
    el("ul", {class: "steps"}, ...steps),
    body.error ? el("p", {class: "bad"}, body.error) : null,
    rows.length ? hitTable(rows.slice(0, 50)) : null,
    rows.length > 50 ? el("p", {class: "status"}, `first 50 of ${rows.length} rows`) : null,
    progress.log ? el("details", {}, el("summary", {}, "log"), el("pre", {}, progress.log)) : null));
}

async function followTask(taskId) {
  followed = taskId;
  showTaskChat(taskId, false);
  const body = await guarded(() => finished(taskId, renderProgress, () => followed === taskId), {clear: false});
  if (!body) return; // the poll failed (the error is shown), or another task is followed now
  renderProgress(body);
  if (body.status === "finished" && body.result.data.length) { // an ingestion has no rows to ask about
    taskRows.set(taskId, body.result.data);
    showTaskChat(taskId, true);
  }
  await guarded(refreshTasks, {clear: false});
}

// -- a chat about a finished task's rows (mosaicRAG's /task/chat) ---------------------------------------

const taskChats = new Map(); // task id -> {chatId, turns}
const taskRows = new Map(); // task id -> its result rows (the sources' titles)

function showTaskChat(taskId, finished) {
  const form = $("task-chat-form");
  form.hidden = !finished;
  form.dataset.task = taskId;
  renderTaskChat(taskId);
}

/** The chat's turns; `pending` ({question, text}) is a question whose answer is still being written. */
function renderTaskChat(taskId, pending) {
  const rows = taskRows.get(taskId) || [];
  const turns = (taskChats.get(taskId) || {turns: []}).turns.map((turn) => el("div", {class: "task-turn"},
    el("div", {class: "turn user"}, el("pre", {}, turn.question)),
    answerView(turn.answer, sourceNames(turn.sources, rows)),
    // a follow-up is asked with the chat before it (query.contextualize)
    turn.askedAs ? el("div", {class: "searched"}, `asked as: ${turn.askedAs}`) : null));
  if (pending) turns.push(el("div", {class: "task-turn"}, el("div", {class: "turn user"}, el("pre", {}, pending.question)),
    el("div", {class: "turn assistant pending"}, el("pre", {}, pending.text || "…"))));
  $("task-chat-log").replaceChildren(...turns);
}

async function askTask(event) {
  event.preventDefault();
  const taskId = $("task-chat-form").dataset.task;
  const message = $("task-chat-input").value.trim();
  if (!message) return;
  $("task-chat-send").disabled = true;
  try {
    await guarded(async () => {
      if (!taskChats.has(taskId)) {
        const chatId = await call("GET", `task/chat/new?task_id=${encodeURIComponent(taskId)}`);
        taskChats.set(taskId, {chatId: chatId.trim(), turns: []});
      }
      const chat = taskChats.get(taskId);
      const path = `task/chat/${encodeURIComponent(chat.chatId)}?stream=true&message=${encodeURIComponent(message)}`;
      let written = "";
      let reply = null;
      renderTaskChat(taskId, {question: message, text: ""});
      await readEvents(await send("GET", path), (data) => {
        if (data.text !== undefined) renderTaskChat(taskId, {question: message, text: (written += data.text)});
        else reply = data; // the whole reply, once the flow has run
      });
      if (!reply) throw new ApiError("the service ended the answer without a reply");
      chat.turns.push({question: message, answer: reply.answer, sources: reply.sources || [],
        askedAs: reply.standalone_query});
      $("task-chat-input").value = "";
      renderTaskChat(taskId);
    });
  } finally {
    $("task-chat-send").disabled = false;
    renderTaskChat(taskId); // the answered turns: a refused question leaves none
  }
}

// -- flows --------------------------------------------------------------------------------------------

async function loadFlowList(flows) {
  flows = flows || await call("GET", "flows");
  const item = (name, saved) => el("li", {},
    el("button", {type: "button", class: "link", onclick: () => guarded(() => showFlow(name))}, name),
    saved ? el("span", {class: "status"}, " saved") : null);
  $("flow-list").replaceChildren(...flows.builtin.map((n) => item(n, false)), ...flows.saved.map((n) => item(n, true)));
}

async function showFlow(name) {
  const spec = await call("GET", `flows/${encodeURIComponent(name)}`);
  $("flow-name").value = name;
  $("flow-spec").value = JSON.stringify(spec, null, 2);
  $("flow-status").textContent = "";
}

async function afterFlowChange(message) {
  $("flow-status").textContent = message;
  const flows = await call("GET", "flows");
  await loadFlowList(flows);
  await loadFlows(flows);
}

async function saveFlow(event) {
  event.preventDefault();
  const name = $("flow-name").value.trim();
  await guarded(async () => {
    let spec;
    try {
      spec = JSON.parse($("flow-spec").value);
    } catch (err) {
      throw new ApiError(`the spec is not valid JSON (field: spec): ${err.message}`);
    }
    const saved = await call("PUT", `flows/${encodeURIComponent(name)}`, spec);
    $("flow-spec").value = JSON.stringify(saved.spec, null, 2);
    await afterFlowChange(`saved as ${saved.name}`);
  });
}

async function deleteFlow() {
  const name = $("flow-name").value.trim();
  await guarded(async () => {
    await call("DELETE", `flows/${encodeURIComponent(name)}`);
    await afterFlowChange(`deleted ${name}`);
  });
}

async function useFlow() {
  const name = $("flow-name").value.trim();
  await guarded(loadFlows);
  if ([...$("flow").options].some((o) => o.value === name)) {
    $("flow").value = name;
    showTab("search");
    await guarded(describeFlow);
  } else {
    showError(`'${name}' is not a flow the service knows: save it first`);
  }
}

// -- indices ------------------------------------------------------------------------------------------

let indexListing = {indices: [], specs: [], limits: {}}; // GET /v1/indices

async function loadIndices() {
  indexListing = await call("GET", "v1/indices");
  $("all-indices").replaceChildren(...indexListing.indices.filter((ix) => ix.name && !ix.default)
    .map((ix) => el("option", {value: ix.name})));
  const rows = indexListing.indices.map((ix) => el("tr", {"data-index": ix.name || ""},
    el("td", {}, ix.name || "(the default index)", ix.default && ix.name ? " (default)" : ""),
    el("td", {}, ix.chunks), el("td", {}, ix.encoder || ""),
    el("td", {}, ix.bm25 === null ? "" : ix.bm25 ? "yes" : "no"), el("td", {}, ix.writable ? "yes" : ""),
    el("td", {},
      el("button", {type: "button", onclick: () => searchIndex(ix)}, "search"),
      ix.name ? el("button", {type: "button", onclick: () => guarded(() => showDocuments(ix))}, "documents") : null,
      ix.writable ? el("button", {type: "button", onclick: () => deleteIndex(ix.name)}, "delete") : null)));
  $("index-table").tBodies[0].replaceChildren(...rows);
  $("own-indices").replaceChildren(...indexListing.indices.filter((ix) => ix.writable)
    .map((ix) => el("option", {value: ix.name})));
  const select = $("upload-spec");
  const chosen = select.value || "ingest";
  select.replaceChildren(...indexListing.specs.map((spec) => el("option", {
    value: spec.name, disabled: Boolean(spec.missing), title: spec.missing || spec.description,
  }, spec.missing ? `${spec.name} (its model is missing)` : spec.name)));
  select.value = chosen;
}

function searchIndex(ix) {
  $("index").value = ix.default ? "" : ix.name; // the default index is what a search without one reads
  showTab("search");
  $("queries").focus();
}

async function deleteIndex(name) {
  if (!window.confirm(`Delete the index '${name}' and every document in it?`)) return;
  await guarded(async () => {
    await call("DELETE", `v1/indices/${encodeURIComponent(name)}`);
    if ($("index-documents").dataset.index === name) $("index-documents").hidden = true;
    await loadIndices();
  });
}

const DOCUMENTS_PAGE = 100;

/** An index's documents, a page at a time (``offset`` > 0 adds the next page below the ones shown). */
async function showDocuments(ix, offset = 0) {
  const page = await call("GET", `v1/indices/${encodeURIComponent(ix.name)}/documents?offset=${offset}`
    + `&limit=${DOCUMENTS_PAGE}`);
  const rows = page.documents.map((doc) => el("tr", {"data-doc": doc.id},
    el("td", {}, doc.id), el("td", {}, doc.title),
    el("td", {}, Object.entries(doc.metadata).map(([name, value]) => `${name}: ${value}`).join(", ")),
    el("td", {}, doc.passages),
    el("td", {}, ix.writable ? el("button", {type: "button", onclick: () => deleteDocument(ix, doc.id)}, "delete")
      : null)));
  const body = $("doc-table").tBodies[0];
  if (offset === 0) body.replaceChildren(...rows);
  else body.append(...rows);
  const shown = offset + page.documents.length;
  $("doc-heading").textContent = `Documents of ${ix.name}: ${shown} of ${page.total}`;
  const more = $("doc-more");
  more.hidden = shown >= page.total;
  more.onclick = () => guarded(() => showDocuments(ix, shown));
  const panel = $("index-documents");
  panel.dataset.index = ix.name;
  panel.hidden = false;
}

async function deleteDocument(ix, docId) {
  if (!window.confirm(`Delete the document '${docId}' from '${ix.name}'?`)) return;
  await guarded(async () => {
    await call("POST", `v1/indices/${encodeURIComponent(ix.name)}/delete`, {ids: [docId]});
    await afterDocumentsChanged(ix.name);
  });
}

/** After the documents of index ``name`` changed: the index table again, and the documents panel if it shows
 * that index (its first page, since what was added or deleted may be anywhere). */
async function afterDocumentsChanged(name) {
  await loadIndices();
  const panel = $("index-documents");
  const ix = indexListing.indices.find((each) => each.name === name);
  if (!panel.hidden && panel.dataset.index === name && ix) await showDocuments(ix);
}

/** A document of the API from a record of a JSONL or JSON file: `_id` (or `id`), `title`, `text`; other scalar
 * fields become its metadata. ``where`` names the record in an error. */
function toDocument(record, where) {
  if (!record || typeof record !== "object" || Array.isArray(record)) {
    throw new ApiError(`${where}: a document must be a JSON object`);
  }
  const {_id: underscoreId, id, title, text, metadata, ...rest} = record;
  const docId = underscoreId ?? id;
  if (docId === undefined || docId === null || docId === "") throw new ApiError(`${where}: no _id`);
  const extra = {...(metadata || {})};
  for (const [name, value] of Object.entries(rest)) {
    if (["string", "number", "boolean"].includes(typeof value)) extra[name] = value;
  }
  const doc = {id: String(docId), title: title ? String(title) : "", text: text === undefined ? "" : String(text)};
  if (Object.keys(extra).length) doc.metadata = extra;
  return doc;
}

const JSON_FILE = /\.jsonl?$/i; // parsed here into documents; PDF, text and Markdown files go as they are

async function fileDocuments(file) {
  const content = await file.text();
  if (/\.jsonl$/i.test(file.name)) {
    return content.split("\n").map((line, n) => [line.trim(), n]).filter(([line]) => line).map(([line, n]) => {
      let record;
      try {
        record = JSON.parse(line);
      } catch (err) {
        throw new ApiError(`${file.name}, line ${n + 1}: not valid JSON (${err.message})`);
      }
      return toDocument(record, `${file.name}, line ${n + 1}`);
    });
  }
  let records;
  try {
    records = JSON.parse(content);
  } catch (err) {
    throw new ApiError(`${file.name}: not valid JSON (${err.message})`);
  }
  records = Array.isArray(records) ? records : records.documents;
  if (!Array.isArray(records)) throw new ApiError(`${file.name}: a list of documents, or {"documents": [...]}`);
  return records.map((record, n) => toDocument(record, `${file.name}, document ${n + 1}`));
}

/** What one Add sends: documents (from JSON and JSONL files and the pasted text) in batches that fit
 * max_documents_per_request and max_body_bytes, then the other files in groups that fit max_upload_bytes;
 * ``options`` (spec, replace) go with each. */
async function uploadRequests(options) {
  const chosen = [...$("upload-files").files];
  const documents = [];
  for (const file of chosen.filter((f) => JSON_FILE.test(f.name))) documents.push(...await fileDocuments(file));
  const text = $("upload-text").value;
  if (text.trim()) {
    const id = $("upload-id").value.trim();
    if (!id) throw new ApiError("the pasted text needs an id (field: id)");
    documents.push({id, title: $("upload-title").value.trim(), text});
  }
  const requests = batches(documents).map((batch) => ({route: "documents", body: {documents: batch, ...options}}));
  for (const group of fileGroups(chosen.filter((f) => !JSON_FILE.test(f.name)))) {
    const form = new FormData();
    for (const file of group) form.append("files", file, file.name);
    for (const [name, value] of Object.entries(options)) form.append(name, String(value));
    requests.push({route: "files", body: form});
  }
  if (!requests.length) throw new ApiError("choose files or paste a text to add");
  return requests;
}

function fileGroups(files) {
  const most = 0.95 * indexListing.limits.max_upload_bytes;
  const groups = [];
  let group = [];
  let size = 0;
  for (const file of files) {
    if (file.size > most) {
      throw new ApiError(`${file.name}: ${file.size} bytes, over the service's max_upload_bytes `
        + `(${indexListing.limits.max_upload_bytes})`);
    }
    if (group.length && size + file.size > most) {
      groups.push(group);
      group = [];
      size = 0;
    }
    group.push(file);
    size += file.size;
  }
  if (group.length) groups.push(group);
  return groups;
}

/** The documents in batches that one request may carry (the listing's limits: count, and bytes with room). */
function batches(documents) {
  const {max_documents_per_request: most, max_body_bytes: bytes} = indexListing.limits;
  const encoder = new TextEncoder();
  const result = [];
  let batch = [];
  let size = 0;
  for (const doc of documents) {
    const docSize = encoder.encode(JSON.stringify(doc)).length + 1;
    if (batch.length && (batch.length >= most || size + docSize > 0.9 * bytes - 200)) {
      result.push(batch);
      batch = [];
      size = 0;
    }
    batch.push(doc);
    size += docSize;
  }
  if (batch.length) result.push(batch);
  return result;
}

/** A task followed until it ends (its final progress object), or until ``following()`` says stop (null);
 * ``onProgress`` gets its progress object while it runs. */
async function finished(taskId, onProgress, following = () => true) {
  for (;;) {
    const body = await call("GET", `task/progress/${encodeURIComponent(taskId)}`);
    if (!following()) return null;
    if (body.has_finished) return body;
    onProgress(body);
    await pause();
  }
}

async function upload(event) {
  event.preventDefault();
  const name = $("upload-index").value.trim();
  const status = $("upload-status");
  $("upload-button").disabled = true;
  try {
    await guarded(async () => {
      const isNew = !indexListing.indices.some((ix) => ix.name === name && ix.writable);
      const options = isNew ? {spec: $("upload-spec").value} : {};
      if ($("upload-replace").checked) options.replace = true;
      const requests = await uploadRequests(options);
      let added = 0;
      let chunks = 0;
      for (const [n, request] of requests.entries()) {
        const where = requests.length > 1 ? `part ${n + 1} of ${requests.length}: ` : "";
        status.textContent = `${where}sending…`;
        const queued = await call("POST", `v1/indices/${encodeURIComponent(name)}/${request.route}`, request.body);
        const done = await finished(queued.task_id, (progress) => {
          const step = progress.progress.current_step || "queued";
          const info = progress.progress.step_progress[step] || {};
          status.textContent = `${where}task ${queued.task_id}: ${step}, ${info.rows_out || 0} of `
            + `${queued.documents} document(s)`;
        });
        if (done.status !== "finished") {
          throw new ApiError(`task ${queued.task_id} ${done.status}: ${done.error || ""} (${added} document(s) `
            + "of earlier parts are in the index)");
        }
        added += done.result.aggregated_data.documents;
        chunks += done.result.aggregated_data.chunks;
      }
      status.textContent = `added ${added} document(s) to ${name} as ${chunks} passage(s)`;
      $("upload-files").value = "";
      $("upload-text").value = "";
      await afterDocumentsChanged(name);
    });
  } finally {
    $("upload-button").disabled = false;
  }
}

async function deleteDocuments(event) {
  event.preventDefault();
  const name = $("delete-docs-index").value.trim();
  const ids = $("delete-docs-ids").value.split(/[\n,]/).map((id) => id.trim()).filter(Boolean);
  await guarded(async () => {
    const done = await call("POST", `v1/indices/${encodeURIComponent(name)}/delete`, {ids});
    const missing = done.missing.length ? `; not in the index: ${done.missing.join(", ")}` : "";
    $("delete-docs-status").textContent = `deleted ${done.deleted.length} document(s) (${done.chunks} `
      + `passage(s))${missing}`;
    await afterDocumentsChanged(name);
  });
}

// -- chat ---------------------------------------------------------------------------------------------

let messages = [];

async function loadChatModels() {
  const models = await call("GET", "v1/models");
  const select = $("chat-model");
  const chosen = select.value;
  const usable = models.data.filter((m) => (m.type === "chat" && m.status === "ready") || m.type === "flow");
  const label = (m) => (m.type === "flow" ? `${m.id} (flow)` : m.id);
  select.replaceChildren(...usable.map((m) => el("option", {value: m.id, "data-type": m.type}, label(m))));
  if (usable.some((m) => m.id === chosen)) select.value = chosen;
}

function renderChat(pending) {
  const turns = messages.map((m) => el("div", {class: `turn ${m.role}`}, el("pre", {}, m.content),
    // a follow-up that a flow searched for with its conversation (query.contextualize) says so
    m.searched ? el("div", {class: "searched"}, `searched for: ${m.searched}`) : null));
  if (pending !== undefined) turns.push(el("div", {class: "turn assistant pending"}, el("pre", {}, pending || "…")));
  $("chat-log").replaceChildren(...turns);
}

/** Reads a response of server-sent events, calling onData with each event's data parsed as JSON, until
 * [DONE] or the end; an error event throws. A refused request throws the service's message. */
async function readEvents(response, onData) {
  if (!response.ok) throw new ApiError(describe(response.status, await response.json().catch(() => null)));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ApiError(describe(chunk.error.code || "error", chunk));
        onData(chunk);
      }
    }
  }
}

/** POST /v1/chat/completions with stream: true; calls onText with the reply so far as its chunks arrive, and
 * returns {text, searched} (searched: what a flow searched for, when it made a follow-up stand alone). */
async function streamChat(body, onText) {
  let text = "";
  let searched = "";
  await readEvents(await send("POST", "v1/chat/completions", body), (chunk) => {
    const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
    if (delta && delta.content) {
      text += delta.content;
      onText(text);
    }
    if (delta && delta.standalone_query) searched = delta.standalone_query;
  });
  return {text, searched};
}

async function sendChat(event) {
  event.preventDefault();
  const content = $("chat-input").value.trim();
  if (!content) return;
  messages.push({role: "user", content});
  $("chat-input").value = "";
  renderChat("");
  $("chat-send").disabled = true;
  try {
    const body = {model: $("chat-model").value, stream: true,
      messages: messages.map((m) => ({role: m.role, content: m.content}))};
    const chosen = $("chat-model").selectedOptions[0];
    const index = $("chat-index").value.trim();
    if (index && chosen && chosen.dataset.type === "flow") body.index = index; // a model alone reads no index
    const reply = await guarded(() => streamChat(body, renderChat));
    if (reply === undefined) messages.pop(); // refused: the message is not part of the conversation
    else messages.push({role: "assistant", content: reply.text, searched: reply.searched});
    renderChat();
  } finally {
    $("chat-send").disabled = false;
  }
}

// -- start --------------------------------------------------------------------------------------------

function reload() {
  guarded(async () => {
    await checkHealth();
    await loadFlows();
    await loadIndices(); // the index fields' suggestions
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const key = $("api-key");
  key.value = window.localStorage.getItem(KEY_STORE) || "";
  key.addEventListener("change", () => {
    window.localStorage.setItem(KEY_STORE, key.value.trim());
    reload();
  });
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
  }
  $("search-form").addEventListener("submit", search);
  $("flow").addEventListener("change", () => guarded(describeFlow));
  $("enqueue-button").addEventListener("click", enqueue);
  $("chat-form").addEventListener("submit", sendChat);
  $("flow-form").addEventListener("submit", saveFlow);
  $("task-chat-form").addEventListener("submit", askTask);
  $("flow-delete").addEventListener("click", deleteFlow);
  $("flow-use").addEventListener("click", useFlow);
  $("upload-form").addEventListener("submit", upload);
  $("delete-docs-form").addEventListener("submit", deleteDocuments);
  $("chat-clear").addEventListener("click", () => {
    messages = [];
    renderChat();
  });
  reload();
});
