"use strict";
// Tessera's web UI. Every action is one call of the service's HTTP API (docs/serving.md), sent with the
// API key typed at the top; text from the service is put in the page as text, never as HTML.

const KEY_STORE = "tessera.apiKey";
const ROOT = new URL("..", window.location.href); // the app's root: the page lives at <root>/ui/
const POLL_MS = 700;
const HEALTH_POLL_MS = 3000; // while the service is not ready, /healthz is asked again this often
const TASK_ROWS_PER_QUERY = 50; // a task's rows shown per query
const PREVIEW_CHARS = 280; // a hit's text longer than this is cut in its table, with a "more" button
const HEADING_CHARS = 160; // a query longer than this is cut in its heading (whole in the title)
const TABS = ["search", "chat", "tasks", "flows", "indices", "models"];
const $ = (id) => document.getElementById(id);

// -- the API ------------------------------------------------------------------------------------------

class ApiError extends Error {}
/** A late answer to a request sent before the user typed another key (a refusal of the old key, or its data). Not
 * shown, or it would overwrite what the new key's requests show. */
class StaleKeyError extends Error {}

const typedKey = () => $("api-key").value.trim();

/** Throws the refusal of ``response`` (its ``payload``), or a StaleKeyError when it refused an older key. */
function refuse(response, payload, sentKey) {
  if (response.status === 401 && typedKey() !== sentKey) throw new StaleKeyError();
  // the service's words are for any client ("send 'Authorization: Bearer KEY'"); a page user types it here
  const where = response.status === 401 ? ". Type the service's API key in the API key field at the top" : "";
  throw new ApiError(describe(response.status, payload) + where);
}

function headers(json) {
  const result = {};
  const key = typedKey();
  if (key) result.Authorization = `Bearer ${key}`;
  if (json) result["Content-Type"] = "application/json";
  return result;
}

/** The service's error body (OpenAI's shape) as one line that names the field. ``status`` is the HTTP status, or
 * null for a stream's error event (its response said 200: the error's code says what failed, "model_error: ..."). */
function describe(status, payload) {
  const error = payload && payload.error;
  const head = status === null ? (error && error.code) || "error" : `HTTP ${status}`;
  if (!error) return `${head}: ${typeof payload === "string" ? payload : JSON.stringify(payload)}`;
  const field = error.param ? ` (field: ${error.param})` : "";
  return `${head}${field}: ${error.message}`;
}

const NO_ANSWER = "the service did not answer: is it running?";

/** One request; ``signal`` (an AbortSignal) lets the page stop it, as the chat's Stop button does. A request that
 * gets no answer (the service stopped, the network gone) turns the health badge to "not reachable", which is then
 * read again until the service is back. */
async function send(method, path, body, signal) {
  const form = body instanceof FormData; // files: the browser writes the multipart body and its Content-Type
  try {
    return await fetch(new URL(path, ROOT), {
      method, headers: headers(body !== undefined && !form),
      body: body === undefined || form ? body : JSON.stringify(body), signal,
    });
  } catch (err) {
    if (!(signal && signal.aborted) && path !== "healthz") serviceUnreachable();
    throw new ApiError(`${NO_ANSWER} (${err.message})`);
  }
}

async function call(method, path, body) {
  const sentKey = typedKey();
  const epoch = keyEpoch;
  const response = await send(method, path, body);
  const type = response.headers.get("content-type") || "";
  const payload = type.includes("json") ? await response.json() : await response.text();
  if (epoch !== keyEpoch) throw new StaleKeyError(); // an answer for the key before this one: not to be shown
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

/** ``name`` if the service takes it as a flow's or an index's name (flows/store.py, serve/indices.py), else an
 * error saying what it takes: a "/", "..", "?" or space would make another path than the one meant. */
function checkedName(name, what) {
  if (!name) throw new ApiError(`enter ${what === "index" ? "an" : "a"} ${what} name`);
  const most = what === "index" ? 64 : 100;
  if (!new RegExp(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,${most - 1}}$`).test(name)) {
    throw new ApiError(`'${name}' is not a valid ${what} name (field: name): letters, digits, "_", "." and "-", `
      + `starting with a letter or digit, at most ${most} characters`);
  }
  return name;
}

/** Shows ``label`` and the seconds since it began in ``node`` until the returned function is called: slow work
 * (a model writing an answer) visibly goes on. */
function ticking(node, label) {
  const started = Date.now();
  const show = () => { node.textContent = `${label} ${Math.round((Date.now() - started) / 1000)} s`; };
  show();
  const timer = setInterval(show, 1000);
  return () => clearInterval(timer);
}

/** A query as a heading: a long one cut with an ellipsis, the whole query in its title. */
function queryHeading(query, tag = "h2") {
  const text = String(query ?? "");
  return el(tag, {title: text}, text.length > HEADING_CHARS ? `${text.slice(0, HEADING_CHARS - 1)}…` : text);
}

/** A text with `backticks` (a flow's description) as text nodes and <code> elements: built, never parsed as HTML. */
function withCode(text) {
  return text.split(/`([^`]+)`/).map((part, n) => (n % 2 ? el("code", {}, part) : part));
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
  if (column === "text") return passageText(String(value));
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

/** A passage cut at PREVIEW_CHARS with a "more" button that shows it whole (and "less" that cuts it again): a
 * source is read in the page, not only in a tooltip a keyboard or a phone cannot open. */
function passageText(text) {
  if (text.length <= PREVIEW_CHARS) return text;
  const shown = el("span", {}, `${text.slice(0, PREVIEW_CHARS)}…`);
  const toggle = el("button", {type: "button", class: "link more", "aria-expanded": "false"}, "more");
  toggle.onclick = () => {
    const whole = toggle.getAttribute("aria-expanded") !== "true";
    shown.textContent = whole ? text : `${text.slice(0, PREVIEW_CHARS)}…`;
    toggle.textContent = whole ? "less" : "more";
    toggle.setAttribute("aria-expanded", String(whole));
  };
  return el("span", {}, shown, " ", toggle);
}

/** Hits as a table in a box of its own that scrolls sideways, so a narrow window keeps its width. */
function hitTable(hits) {
  const manyQueries = new Set(hits.map((h) => h.qid)).size > 1; // rows of several queries: say which each is for
  const columns = [...(manyQueries ? ["qid"] : []), "rank", "docno", "title", "score", "text"]
    .filter((c) => hits.some((h) => h[c] !== undefined));
  const result = table(columns, hits, hitCell);
  result.className = "hits";
  return el("div", {class: "scroll"}, result);
}

// -- tabs ---------------------------------------------------------------------------------------------

const onShow = {
  tasks: () => refreshTasks(), models: () => loadModels(), chat: () => loadChatModels(), flows: () => loadFlowList(),
  indices: () => loadIndices(),
};

/** Opens tab ``name``: its panel shown, its tab selected, and (``remember``) its name in the URL (#chat) so that a
 * reload or a shared link opens it again. */
function showTab(name, {remember = true} = {}) {
  for (const button of document.querySelectorAll('nav [role="tab"]')) {
    const selected = button.dataset.tab === name;
    button.setAttribute("aria-selected", String(selected));
    button.tabIndex = selected ? 0 : -1; // the tab list is one stop for Tab; the arrow keys move inside it
  }
  for (const section of document.querySelectorAll("main > section")) section.hidden = section.id !== `tab-${name}`;
  if (remember && window.location.hash !== `#${name}`) window.history.replaceState(null, "", `#${name}`);
  if (onShow[name]) guarded(onShow[name]);
}

/** The tab the URL names (#tasks), or null. */
function tabInUrl() {
  const name = window.location.hash.slice(1);
  return TABS.includes(name) ? name : null;
}

const shownTab = () => document.querySelector('nav [aria-selected="true"]').dataset.tab;

/** Left and right arrows (Home, End) move between the tabs, as in any tab list. */
function moveTab(event) {
  const steps = {ArrowLeft: -1, ArrowRight: 1, Home: -TABS.length, End: TABS.length};
  if (!(event.key in steps)) return;
  event.preventDefault();
  const at = TABS.indexOf(shownTab()) + steps[event.key];
  const name = TABS[Math.max(0, Math.min(TABS.length - 1, at))];
  showTab(name);
  document.querySelector(`nav [data-tab="${name}"]`).focus();
}

// -- the service's state ------------------------------------------------------------------------------

let healthTimer = null;
let wasUnreachable = false; // a request got no answer: once the service answers again, the page reads its lists

/** The health badge; while the service is not ready (models loading, or no answer) it is read again every few
 * seconds, until it is. Back after no answer, the lists a failed request left empty are read again and the
 * "did not answer" error, no longer true, goes. */
async function checkHealth() {
  clearTimeout(healthTimer);
  healthTimer = null;
  const ready = await readHealth();
  clearTimeout(healthTimer); // a request that failed meanwhile may have set one
  healthTimer = ready ? null : setTimeout(checkHealth, HEALTH_POLL_MS);
  if (ready && wasUnreachable) {
    wasUnreachable = false;
    if ($("error").textContent.startsWith(NO_ANSWER)) showError("");
    reloadLists();
    if (onShow[shownTab()]) guarded(onShow[shownTab()], {clear: false});
  }
}

/** A request got no answer: say so in the badge now, and read /healthz until the service answers. */
function serviceUnreachable() {
  wasUnreachable = true;
  const badge = $("health");
  badge.textContent = "not reachable";
  badge.className = "badge bad";
  if (healthTimer === null) healthTimer = setTimeout(checkHealth, HEALTH_POLL_MS);
}

/** GET /healthz into the badge (its reason in the badge's title); whether the service is ready. */
async function readHealth() {
  const badge = $("health");
  const response = await send("GET", "healthz").catch(() => null);
  if (!response) {
    wasUnreachable = true;
    badge.textContent = "not reachable";
    badge.className = "badge bad";
    badge.title = "GET /healthz: no answer";
    return false;
  }
  const body = await response.json().catch(() => ({}));
  if (response.ok) {
    badge.textContent = "ready";
    badge.className = "badge ok";
    badge.title = "GET /healthz";
    return true;
  }
  const waiting = Object.entries(body.models || {}).filter(([, state]) => state !== "ready").map(([name]) => name);
  badge.textContent = waiting.length ? `starting: ${waiting.join(", ")}` : "starting"; // a 503's body names none
  badge.className = "badge wait";
  badge.title = (body.error && body.error.message) || `GET /healthz: HTTP ${response.status}`;
  return false;
}

/** The search tab's flow choice (``flows``: a listing already fetched, else GET /flows). */
async function loadFlows(flows) {
  flows = flows || await call("GET", "flows");
  const select = $("flow");
  const chosen = select.value || select.dataset.chosen || "hybrid"; // (chosen: before another key was typed)
  select.replaceChildren(
    el("optgroup", {label: "built-in"}, ...flows.builtin.map((name) => el("option", {value: name}, name))),
    ...(flows.saved.length ? [el("optgroup", {label: "saved"},
      ...flows.saved.map((name) => el("option", {value: name}, name)))] : []));
  select.value = [...flows.builtin, ...flows.saved].includes(chosen) ? chosen : flows.builtin[0];
  await describeFlow();
}

let flowSpec = null; // the chosen flow's spec (GET /flows/{name}), once read

/** The chosen flow's description and steps, under the form; Search is off for a flow that cannot search. */
async function describeFlow() {
  const name = $("flow").value;
  flowSpec = null;
  updateSearchButtons();
  const spec = await call("GET", `flows/${encodeURIComponent(name)}`);
  if ($("flow").value !== name) return; // another flow was chosen meanwhile: its own call describes it
  flowSpec = spec;
  const steps = Object.entries(spec.steps).map(([id, step]) => (id === step.op ? id : `${id} (${step.op})`));
  $("flow-description").replaceChildren(...withCode(`${spec.description || ""} Steps: ${steps.join(", ")}`.trim()));
  updateSearchButtons();
}

/** Whether a flow reads documents (a step ``sources.*``, as ``ingest``) to build an index rather than searching for
 * queries: the service refuses to search with it. */
function readsDocuments(spec) {
  return Object.values((spec && spec.steps) || {}).some((step) => String(step.op || "").startsWith("sources."));
}

let searching = false; // a search is running

/** Search and Run as a task: off while a search runs, and for a flow that builds an index (said below them). */
function updateSearchButtons() {
  const unsearchable = readsDocuments(flowSpec);
  $("search-button").disabled = searching || unsearchable;
  $("enqueue-button").disabled = unsearchable;
  $("flow-warning").hidden = !unsearchable;
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
  const topK = $("top-k").value.trim();
  if (topK !== "") body.top_k = Number(topK);
  return body;
}

/** Each source docno as its row's title and docno, where ``rows`` has the row. */
function sourceNames(sources, rows) {
  const titles = new Map(rows.map((row) => [row.docno, row.title]));
  return sources.map((docno) => (titles.get(docno) ? `${titles.get(docno)} (${docno})` : docno));
}

/** An answer and its sources: ``items`` each source's text, numbered by the list, or (``numbered``) with the
 * numbers the answer cites them by already in the text; ``cut``: the model stopped at its max_tokens, so the
 * answer may end mid-sentence. */
function answerView(answer, items, {degraded = null, numbered = false, cut = false} = {}) {
  const list = el(numbered ? "ul" : "ol", {class: "sources"}, ...items.map((item) => el("li", {}, item)));
  return el("div", {class: "answer"},
    el("p", {}, el("strong", {}, "Answer: "), answer || "(no answer)"),
    cut ? el("p", {class: "status cut"}, "(cut off at the step's max_tokens)") : null,
    items.length ? list : el("p", {class: "status"}, "no sources cited"),
    degraded ? el("p", {class: "status"}, `degraded: ${JSON.stringify(degraded)}`) : null);
}

/** A query's answer: its sources as the flow's references when it has them ("[4] Title (PDF, file.pdf, p. 2)",
 * numbered as the answer cites them), else by title and docno. */
function answerBlock(metadata, hits) {
  if (typeof metadata.answer !== "string") return null;
  const references = Array.isArray(metadata.references) ? metadata.references.map(String) : [];
  const options = {degraded: metadata.degraded, cut: metadata.finish_reason === "length"};
  if (references.length) return answerView(metadata.answer, references, {...options, numbered: true});
  return answerView(metadata.answer, sourceNames(metadata.sources || [], hits), options);
}

/** The metadata keys that a flow's summarize.results steps write (their output_key, "summary" unless set). */
function summaryKeys(spec) {
  const keys = Object.values((spec && spec.steps) || {}).filter((step) => step.op === "summarize.results")
    .map((step) => (step.params && step.params.output_key) || "summary");
  return keys.length ? [...new Set(keys)] : ["summary"];
}

/** A query's summary (the summarize flow's), shown as an answer is rather than only in the folded metadata. */
function summaryBlock(metadata, spec) {
  const shown = summaryKeys(spec).filter((key) => typeof metadata[key] === "string").map((key) =>
    el("p", {}, el("strong", {}, key === "summary" ? "Summary: " : `Summary (${key}): `), metadata[key]));
  return shown.length ? el("div", {class: "answer summary"}, ...shown) : null;
}

/** Everything a flow wrote for one query, as the Search tab and a task's view both show it: the answer with its
 * sources, the summary, the hits (the first ``most``), the whole metadata folded. */
function queryBlocks(metadata, hits, spec, most = Infinity) {
  return [answerBlock(metadata, hits), summaryBlock(metadata, spec),
    hits.length ? hitTable(hits.slice(0, most)) : el("p", {class: "status"}, "no hits"),
    hits.length > most ? el("p", {class: "status"}, `first ${most} of ${hits.length} rows`) : null,
    Object.keys(metadata).length
      ? el("details", {}, el("summary", {}, "metadata"), el("pre", {}, JSON.stringify(metadata, null, 2)))
      : null];
}

function renderResults(results, spec) {
  $("results").replaceChildren(...results.map((r) => el("article", {class: "result", "data-qid": r.qid},
    queryHeading(r.query), ...queryBlocks(r.metadata || {}, r.hits, spec))));
}

async function search(event) {
  event.preventDefault();
  const body = flowBody();
  const spec = flowSpec;
  const epoch = keyEpoch;
  $("results").replaceChildren(); // the previous search's results are not this one's, whatever this one gives
  searching = true;
  updateSearchButtons();
  const stopTicking = ticking($("search-status"), `running ${body.flow}…`);
  try {
    const answer = await guarded(() => call("POST", "v1/search", body));
    stopTicking();
    if (epoch !== keyEpoch) return; // the key changed meanwhile: this answer was for the other key
    if (!answer) {
      $("search-status").textContent = "";
      return;
    }
    const ms = answer.took_ms;
    const took = ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
    const count = `${answer.results.length} ${answer.results.length === 1 ? "query" : "queries"}`;
    $("search-status").textContent = `${answer.flow}: ${count} in ${took}`;
    renderResults(answer.results, spec);
  } finally {
    stopTicking();
    searching = false;
    updateSearchButtons();
  }
}

/** The search as a task (POST /task/enqueue, the same body): it runs on Ray, followed under Tasks. */
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

/** The newest page of the caller's tasks (GET /tasks answers newest first, a page at a time) and the counts. */
async function refreshTasks() {
  const listing = await call("GET", "tasks");
  $("task-counts").textContent = Object.entries(listing.counts).map(([state, n]) => `${n} ${state}`).join(", ")
    || "no tasks yet";
  $("task-table").tBodies[0].replaceChildren(...listing.tasks.map(taskRow));
  offerOlder(listing.next);
}

/** A button after the counts while older tasks remain: it adds the next page (``before``: the page's ``next``). */
function offerOlder(next) {
  $("task-counts").querySelector("button")?.remove();
  if (!next) return;
  const older = async () => {
    const page = await call("GET", `tasks?before=${encodeURIComponent(next)}`);
    $("task-table").tBodies[0].append(...page.tasks.map(taskRow));
    offerOlder(page.next);
  };
  $("task-counts").append(" ", el("button", {type: "button", class: "link", onclick: () => guarded(older)},
    "older tasks"));
}

function taskRow(task) {
  const unfinished = task.status === "queued" || task.status === "running";
  return el("tr", {"data-task": task.id},
    el("td", {}, el("button", {type: "button", class: "link", onclick: () => followTask(task.id)}, task.id)),
    el("td", {}, task.flow || ""), el("td", {class: `state ${task.status}`}, task.status),
    el("td", {}, task.steps_done ?? ""), el("td", {}, when(task.created)),
    el("td", {}, unfinished ? el("button", {type: "button", onclick: () => cancelTask(task.id)}, "cancel") : ""));
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

const isRecord = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

/** A finished task's result by query, in the order its rows come: each query's text, rows and metadata (its
 * ``aggregated_data`` entry: answer, sources...). An ingestion's result has neither, so it gives none. */
function taskQueries(result) {
  const queries = new Map();
  const query = (qid) => {
    if (!queries.has(qid)) queries.set(qid, {qid, text: "", rows: [], metadata: {}});
    return queries.get(qid);
  };
  for (const row of result.data || []) {
    if (row.qid === undefined || row.qid === null) continue;
    const entry = query(String(row.qid));
    entry.rows.push(row);
    if (!entry.text && row.query) entry.text = String(row.query);
  }
  for (const [qid, metadata] of Object.entries(result.aggregated_data || {})) {
    if (isRecord(metadata)) query(qid).metadata = metadata;
  }
  return [...queries.values()];
}

/** One query of a task as the Search tab shows a query: its answer, its rows (a query's own row, which a flow that
 * answers without searching gives, is no hit), its metadata. */
function taskQuery(entry) {
  const hits = entry.rows.filter((row) => row.docno !== undefined && row.docno !== null);
  return el("div", {class: "task-query", "data-qid": entry.qid},
    queryHeading(entry.text || `query ${entry.qid}`, "h3"), ...queryBlocks(entry.metadata, hits, null,
      TASK_ROWS_PER_QUERY));
}

function renderProgress(body) {
  const progress = body.progress;
  const steps = Object.entries(progress.step_progress || {}).map(([step, info]) =>
    el("li", {}, `${step}: ${info && info.status ? info.status : JSON.stringify(info)}`));
  const queries = body.result ? taskQueries(body.result) : [];
  $("task-detail").replaceChildren(el("article", {class: "result", "data-task": body.task_id},
    el("h2", {}, `task ${body.task_id}: ${body.status}`),
    el("progress", {max: 100, value: progress.pipeline_percentage}),
    el("span", {class: "status"}, ` ${progress.pipeline_progress} steps`),
    el("ul", {class: "steps"}, ...steps),
    body.error ? el("p", {class: "bad"}, body.error) : null,
    ...queries.map(taskQuery),
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
  await guarded(async () => {
    const name = checkedName($("flow-name").value.trim(), "flow");
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

/** Deletes the saved flow named in the editor, and empties the editor: what it held is no flow any more. */
async function deleteFlow() {
  await guarded(async () => {
    const name = checkedName($("flow-name").value.trim(), "flow");
    await call("DELETE", `flows/${encodeURIComponent(name)}`);
    $("flow-name").value = "";
    $("flow-spec").value = "";
    await afterFlowChange(`deleted ${name}`);
  });
}

async function useFlow() {
  await guarded(async () => {
    const name = checkedName($("flow-name").value.trim(), "flow");
    await loadFlows();
    if (![...$("flow").options].some((o) => o.value === name)) {
      throw new ApiError(`'${name}' is not a flow the service knows: save it first`);
    }
    $("flow").value = name;
    showTab("search");
    await describeFlow();
  });
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
    el("td", {}, ix.shared ? "yes" : "no"),
    el("td", {},
      el("button", {type: "button", onclick: () => searchIndex(ix)}, "search"),
      ix.name ? el("button", {type: "button", onclick: () => guarded(() => showDocuments(ix))}, "documents") : null,
      ix.writable ? el("button", {type: "button", title: ix.shared ? "only your key may search it"
        : "every key may search it", onclick: () => shareIndex(ix.name, !ix.shared)},
      ix.shared ? "make private" : "share") : null,
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

/** Let every key search an index of this key (``shared``), or only this key (PATCH /v1/indices/{name}). */
async function shareIndex(name, shared) {
  await guarded(async () => {
    await call("PATCH", `v1/indices/${encodeURIComponent(name)}`, {shared});
    await loadIndices();
  });
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
  const status = $("upload-status");
  status.textContent = ""; // the last upload's outcome is not this one's
  $("upload-button").disabled = true;
  try {
    const added = await guarded(async () => {
      const name = checkedName($("upload-index").value.trim(), "index");
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
      return true;
    });
    if (!added) status.textContent = ""; // refused: the error says how far it got, not a stale "sending…"
  } finally {
    $("upload-button").disabled = false;
  }
}

async function deleteDocuments(event) {
  event.preventDefault();
  const ids = $("delete-docs-ids").value.split(/[\n,]/).map((id) => id.trim()).filter(Boolean);
  $("delete-docs-status").textContent = ""; // the last deletion's outcome is not this one's
  await guarded(async () => {
    const name = checkedName($("delete-docs-index").value.trim(), "index");
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
  // a flow the service cannot run as it is (a benchmark's, needing a dataset) is listed, off, its reason its title
  const listed = models.data.filter((m) => (m.type === "chat" && m.status === "ready") || m.type === "flow");
  const ready = (m) => m.status === undefined || m.status === "ready";
  const label = (m) => (m.type === "flow" ? `${m.id} (flow${ready(m) ? "" : `, ${m.status}`})` : m.id);
  select.replaceChildren(...listed.map((m) => el("option", {value: m.id, "data-type": m.type, disabled: !ready(m),
    title: ready(m) ? "" : m.reason || m.status}, label(m))));
  const usable = listed.filter(ready);
  if (usable.some((m) => m.id === chosen)) select.value = chosen;
  else if (usable.length) select.value = usable[0].id;
}

function renderChat(pending) {
  const turns = messages.map((m) => el("div", {class: `turn ${m.role}`}, el("pre", {}, m.content),
    // a follow-up that a flow searched for with its conversation (query.contextualize) says so
    m.searched ? el("div", {class: "searched"}, `searched for: ${m.searched}`) : null,
    m.stopped ? el("div", {class: "searched"}, "stopped") : null));
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
        if (chunk.error) throw new ApiError(describe(null, chunk)); // "model_error: ...", the code for a status
        onData(chunk);
      }
    }
  }
}

/** POST /v1/chat/completions with stream: true; calls onText with the reply so far as its chunks arrive, and
 * returns {text, searched, stopped} (searched: what a flow searched for, when it made a follow-up stand alone;
 * stopped: ``signal`` stopped it, and text is what was written until then). */
async function streamChat(body, onText, signal) {
  let text = "";
  let searched = "";
  try {
    await readEvents(await send("POST", "v1/chat/completions", body, signal), (chunk) => {
      const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
      if (delta && delta.content) {
        text += delta.content;
        onText(text);
      }
      if (delta && delta.standalone_query) searched = delta.standalone_query;
    });
  } catch (err) {
    if (!signal.aborted) throw err;
    return {text, searched, stopped: true};
  }
  return {text, searched, stopped: false};
}

let chatStopper = null; // the AbortController of the answer being written, while one is

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
  if (!content || chatStopper) return;
  const conversation = messages; // "New chat" or another key replaces it: a late reply then goes nowhere
  conversation.push({role: "user", content});
  input.value = "";
  renderChat("");
  const stopper = new AbortController();
  chatStopper = stopper;
  setChatBusy(true);
  const stopTicking = ticking($("chat-status"), "answering…");
  try {
    const body = {model: $("chat-model").value, stream: true,
      messages: conversation.map((m) => ({role: m.role, content: m.content}))};
    const chosen = $("chat-model").selectedOptions[0];
    const index = $("chat-index").value.trim();
    if (index && chosen && chosen.dataset.type === "flow") body.index = index; // a model alone reads no index
    const reply = await guarded(() => streamChat(body, renderChat, stopper.signal));
    if (conversation !== messages) return;
    if (reply === undefined || (reply.stopped && !reply.text)) {
      conversation.pop(); // refused (the error is shown) or stopped unanswered: not part of the conversation,
      if (!input.value) input.value = content; // and the message is back in the box to send again
    } else {
      conversation.push({role: "assistant", content: reply.text, searched: reply.searched, stopped: reply.stopped});
    }
    renderChat();
  } finally {
    stopTicking();
    $("chat-status").textContent = "";
    chatStopper = null;
    setChatBusy(false);
  }
}

/** Ctrl+Enter (Cmd+Enter on a Mac) in a box where Enter starts a new line (a message, the queries) submits its
 * form, as its submit button does. */
function submitOnCtrlEnter(event) {
  if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
  event.preventDefault();
  event.target.form.requestSubmit();
}

/** A box of only spaces and blank lines holds no query: the browser refuses the submit, as for an empty box, rather
 * than the service answering with its API's field names. */
function requireAQuery(event) {
  const box = event.target;
  box.setCustomValidity(box.value.trim() || !box.value ? "" : "Type at least one query (one a line).");
}

/** A new conversation: the answer being written is stopped and the turns are gone. */
function newChat() {
  stopChat();
  messages = [];
  renderChat();
}

// -- start --------------------------------------------------------------------------------------------

/** The search tab's flows and the index fields' suggestions. */
function reloadLists() {
  guarded(async () => {
    await loadFlows();
    await loadIndices(); // the index fields' suggestions
  }, {clear: false});
}

function reload() {
  showError("");
  checkHealth();
  reloadLists();
}

let keyEpoch = 0; // counts the keys typed: a search's late answer for an earlier key is dropped

/** Everything shown or held from the previous key's calls, gone: the new key sees only what its own calls give. */
function forgetKeyData() {
  keyEpoch += 1;
  newChat();
  followed = null;
  taskChats.clear();
  taskRows.clear();
  flowSpec = null;
  indexListing = {indices: [], specs: [], limits: {}};
  $("flow").dataset.chosen = $("flow").value || $("flow").dataset.chosen || "";
  for (const id of ["results", "task-detail", "task-chat-log", "chat-log", "flow-list", "flow", "chat-model",
    "all-indices", "own-indices", "flow-description"]) $(id).replaceChildren();
  for (const id of ["task-table", "index-table", "doc-table", "model-table"]) $(id).tBodies[0].replaceChildren();
  for (const id of ["search-status", "task-counts", "upload-status", "delete-docs-status", "flow-status",
    "doc-heading"]) $(id).textContent = "";
  for (const id of ["flow-name", "flow-spec"]) $(id).value = ""; // a saved flow of the other key
  $("task-chat-form").hidden = true;
  $("index-documents").hidden = true;
  updateSearchButtons();
}

let appliedKey = null; // the key the page's data is for

/** A key typed (its field changed, or Enter in it): kept by the browser, the old key's data gone, all read again. */
function applyKey() {
  const typed = typedKey();
  if (typed === appliedKey) return;
  appliedKey = typed;
  window.localStorage.setItem(KEY_STORE, typed);
  forgetKeyData();
  reload();
  if (onShow[shownTab()]) guarded(onShow[shownTab()], {clear: false});
}

document.addEventListener("DOMContentLoaded", () => {
  const key = $("api-key");
  key.value = window.localStorage.getItem(KEY_STORE) || "";
  appliedKey = typedKey();
  key.addEventListener("change", applyKey);
  $("key-form").addEventListener("submit", (event) => { // the field is in a form for the browser; it sends nothing
    event.preventDefault();
    applyKey();
  });
  for (const button of document.querySelectorAll('nav [role="tab"]')) {
    button.addEventListener("click", () => showTab(button.dataset.tab));
  }
  document.querySelector('nav[role="tablist"]').addEventListener("keydown", moveTab);
  window.addEventListener("hashchange", () => tabInUrl() && showTab(tabInUrl(), {remember: false}));
  $("search-form").addEventListener("submit", search);
  $("flow").addEventListener("change", () => guarded(describeFlow));
  $("enqueue-button").addEventListener("click", enqueue);
  $("chat-form").addEventListener("submit", sendChat);
  $("chat-input").addEventListener("keydown", submitOnCtrlEnter);
  $("queries").addEventListener("keydown", submitOnCtrlEnter);
  $("queries").addEventListener("input", requireAQuery);
  // the browser refused a submit (a field's own check): the error of the last action is not this one's
  document.addEventListener("invalid", () => showError(""), true);
  $("chat-stop").addEventListener("click", stopChat);
  $("flow-form").addEventListener("submit", saveFlow);
  $("task-chat-form").addEventListener("submit", askTask);
  $("flow-delete").addEventListener("click", deleteFlow);
  $("flow-use").addEventListener("click", useFlow);
  $("upload-form").addEventListener("submit", upload);
  $("delete-docs-form").addEventListener("submit", deleteDocuments);
  $("chat-clear").addEventListener("click", newChat);
  reload();
  if (tabInUrl()) showTab(tabInUrl(), {remember: false});
});
