"use strict";
// Tessera's web UI, its first script: the calls of the service's HTTP API (docs/serving.md), each sent with the API
// key typed at the top, their errors as one line naming the field, and the small helpers every tab uses. Text from
// the service is put in the page as text, never as HTML. index.html loads the tabs' scripts after it, app.js last.

const ROOT = new URL("..", window.location.href); // the app's root: the page lives at <root>/ui/
const $ = (id) => document.getElementById(id);

/** An error the page shows; a refusal of the service keeps its HTTP ``status`` and its error's ``code`` and
 * ``param``, for a tab that says it in its own words. */
class ApiError extends Error {
  constructor(message, {status = null, code = null, param = null, ids = null, idsTotal = null, pages = null,
    rows = null} = {}) {
    super(message);
    Object.assign(this, {status, code, param, ids, idsTotal, pages, rows});
  }
}
/** A late answer to a request sent before the user typed another key (a refusal of the old key, or its data), or
 * to a search that is no longer the latest. Not shown, or it would overwrite what the new key's requests show. */
class StaleKeyError extends Error {}

const typedKey = () => $("api-key").value.trim();
let keyEpoch = 0; // counts the keys typed: a search's late answer for an earlier key is dropped

/** Throws the refusal of ``response`` (its ``payload``), or a StaleKeyError when it refused an older key. */
function refuse(response, payload, sentKey) {
  if (response.status === 401 && typedKey() !== sentKey) throw new StaleKeyError();
  // the service's words are for any client ("send 'Authorization: Bearer KEY'"); a page user types it here
  const where = response.status === 401 ? ". Type the service's API key in the API key field at the top" : "";
  const error = (payload && payload.error) || {};
  throw new ApiError(describe(response.status, payload) + where, {status: response.status, code: error.code,
    param: error.param, ids: error.ids || null, idsTotal: error.ids_total ?? null, pages: error.pages ?? null,
    rows: error.rows ?? null});
}

/** What is wrong with a typed key that no request can carry, or "": a key is printable ASCII (``tessera keys``
 * writes letters, digits, "-" and "_"), and a pasted zero-width space or curly quote made ``fetch`` throw before
 * sending anything, which the page took for a service that does not answer. */
function keyProblem(key) {
  const chars = [...key];
  const at = chars.findIndex((c) => c < "!" || c > "~");
  if (at < 0) return "";
  const code = chars[at].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
  return `the API key holds a character no key has (character ${at + 1}, U+${code}): type it again`;
}

/** The request's headers: the key for every path but the health check, which needs none. */
function headers(json, path) {
  const result = {};
  const key = typedKey();
  if (key && path !== "healthz") result.Authorization = `Bearer ${key}`;
  if (json) result["Content-Type"] = "application/json";
  return result;
}

/** A 413 without the service's JSON: nginx's own page for a body over its client_max_body_size (1 MB unless set),
 * which the service never saw ("413 Request Entity Too Large" said neither who refused it nor what to do). */
const PROXY_TOO_LARGE = "the proxy in front of the service refused it as too large, before the service read it: its "
  + "limit is below the service's (nginx: client_max_body_size, docs/serving.md, Behind a reverse proxy); ask whoever "
  + "runs the service to raise it, or send less at a time";

/** The service's error body (OpenAI's shape) as one line that names the field. ``status`` is the HTTP status, or
 * null for a stream's error event (its response said 200: the error's code says what failed, "model_error: ..."). */
function describe(status, payload) {
  const error = payload && payload.error;
  const head = status === null ? (error && error.code) || "error" : `HTTP ${status}`;
  if (!error && status === 413) return `${head}: ${PROXY_TOO_LARGE} (${pageText(String(payload ?? ""))})`;
  if (!error) return `${head}: ${typeof payload === "string" ? pageText(payload) : JSON.stringify(payload)}`;
  const field = error.param ? ` (${fieldWords(String(error.param))})` : "";
  return `${head}${field}: ${inPageWords(withoutParam(String(error.message), error.param))}`;
}

/** A plain error body as one line: an HTML page (a proxy's "502 Bad Gateway" in front of the service) by its title,
 * else its text, where the page showed the page's markup, tags and all; other text as it came. */
function pageText(body) {
  if (!body.trim()) return "(an empty answer)";
  if (!/^\s*</.test(body)) return body;
  const page = new DOMParser().parseFromString(body, "text/html"); // parsed, never put in the page: no script runs
  return (page.title || page.body?.textContent || "").replace(/\s+/g, " ").trim() || body;
}

/** The field an error names, as the page says it: a step's param (``steps.bm25.params.k``) as "step 'bm25', param
 * 'k'", the step and the param its author wrote in the spec's editor, any other as "field: index". */
function fieldWords(param) {
  const inStep = /^steps\.([^.]+)\.params\.(.+)$/.exec(param);
  return inStep ? `step '${inStep[1]}', param '${inStep[2]}'` : `field: ${param}`;
}

/** The service's pointers to its own routes, written for any client, and the tab of this page that shows the same:
 * "index 'x' does not exist (GET /v1/indices lists the indices)" left a page user with a route to call. */
const ROUTE_HINTS = [
  ["GET /v1/indices lists", "the Indices tab lists"],
  ["GET /v1/models lists", "the Models tab lists"],
  ["(GET /v1/models)", "(the Models tab lists it)"],
  ["GET /flows lists", "the Flows tab lists"],
  ["GET /task/progress/{id} follows", "the Tasks tab follows"],
  ["(GET /task/progress/{id})", "(the Tasks tab follows it)"],
  ['shares it with PATCH /v1/indices/{name} and {"shared": true}',
    "shares it with the share button of the Indices tab"],
];

/** The service's lists written for a client that cannot see them, and what the page says instead: a flow chosen
 * from the list and deleted since (in another tab) was refused with every flow's name, built-in and saved. */
const LIST_HINTS = [
  [/ \(built-in: [^()]*; saved: [^()]*\)$/, " (the Flows tab lists the flows: choose one from the list again)"],
];

/** The service's settings that its messages name for whoever runs it, and what the page says instead: a page user
 * can change no setting, and "(args.service.index_roots)" read as a part of the message gone wrong. */
const SETTING_HINTS = [
  ["outside its index roots (args.service.index_roots)", "outside the folders it reads indices from"],
  [" (args.service.index_roots)", ""],
];

/** ``message`` with each of the service's route pointers (ROUTE_HINTS), settings (SETTING_HINTS) and lists
 * (LIST_HINTS) said as the page's. */
const inPageWords = (message) => LIST_HINTS.reduce((text, [list, said]) => text.replace(list, said),
  [...SETTING_HINTS, ...ROUTE_HINTS].reduce((text, [route, tab]) => text.replaceAll(route, tab), message));

/** A reason the service gives for a flow or model it cannot run (GET /flows' ``status``, GET /v1/models) in the page's
 * words, as the error line says a refusal: a step's param as "step 'x', param 'index'" (it said "step 'x', field
 * 'steps.x.params.index'", the API's path to it), its pointers to routes and its lists as the page's tabs, and
 * without the refusal's "so nothing was run" (the reason is the refusal a run would get: a flow listed ran not). */
const inPageReason = (reason) => inPageWords(String(reason).replace(
  /^step '([^']*)', (?:operator '[^']*', )?field 'steps\.\1\.params\.([^']+)': /, "step '$1', param '$2': ")
  .replaceAll(", so nothing was run: ", ": "));

/** A message without the field it begins with when that is ``param``, shown already ("(field: index)"): "index: ",
 * "field 'flow': ", "step 'fused', field 'steps.fused.op': " and "step 'a', operator 'rerank.api', field
 * 'steps.a.params.url': " said it twice, the last two with the step's and operator's names a flow's author reads in
 * the spec, not a page's user. The field is also left out after the clause that leads the message ("the flow was
 * not run: step 'answer', field 'steps.answer.params.model': model ...", a 503 model_unreachable), and where the
 * step's operator names it within its step ("step 'bm25', operator 'retrieve.bm25', field 'params.filter': ", a
 * filter's column not found, for ``steps.bm25.params.filter``). */
function withoutParam(message, param) {
  if (!param) return message;
  const quoted = (text) => String(text).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const name = quoted(param);
  const inStep = /^steps\.([^.]+)\.(.+)$/.exec(param);
  const own = inStep ? `|step '${quoted(inStep[1])}', (?:operator '[^']*', )?field '${quoted(inStep[2])}'` : "";
  const clause = new RegExp(`(^|: )(?:(?:step '[^']*', )?(?:operator '[^']*', )?field '${name}'${own}): `);
  return message.replace(new RegExp(`^${name}: `), "").replace(clause, "$1") || message;
}

const NO_ANSWER = "the service did not answer: is it running?";

/** One request; ``signal`` (an AbortSignal) lets the page stop it, as the chat's Stop button does. A request that
 * gets no answer (the service stopped, the network gone) turns the health badge to "not reachable", which is then
 * read again until the service is back. */
async function send(method, path, body, signal) {
  const form = body instanceof FormData; // files: the browser writes the multipart body and its Content-Type
  const problem = path === "healthz" ? "" : keyProblem(typedKey());
  if (problem) throw new ApiError(problem, {param: "api-key"});
  try {
    return await fetch(new URL(path, ROOT), {
      method, headers: headers(body !== undefined && !form, path),
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
  const payload = await readBody(response);
  if (epoch !== keyEpoch) throw new StaleKeyError(); // an answer for the key before this one: not to be shown
  if (!response.ok) refuse(response, payload, sentKey);
  return payload;
}

/** A response's body: JSON where it says so, else its text (a proxy's or the HTTP server's own plain error). */
async function readBody(response) {
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? await response.json().catch(() => null) : await response.text();
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    // data-* and aria-* are attributes only (node["aria-label"] sets no attribute a screen reader reads)
    else if (name.startsWith("data-") || name.startsWith("aria-")) node.setAttribute(name, value);
    else node[name] = value;
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** The error line: the message's `backticks` (a command, "build it with `tessera ingest`") as <code>, as a flow's
 * description shows them, where the page showed the backticks. */
function showError(message) {
  const box = $("error");
  box.replaceChildren(...withCode(message));
  box.hidden = !message;
  clearOfError();
  if (!message) { // the field an error named is no longer wrong once the error is gone
    for (const field of document.querySelectorAll('[aria-invalid="true"]')) {
      field.removeAttribute("aria-invalid");
      field.removeAttribute("aria-describedby");
    }
  }
}

/** The error line stays at the window's top (sticky, style.css) over what scrolls under it: the page's scroll padding
 * is kept as tall, so what the keyboard moves to (Tab, Shift+Tab) or a field an error names is scrolled clear of it,
 * where it was scrolled under it, hidden. A message taller than the line may be (40% of the window: a narrow or
 * zoomed one) scrolls inside it: the line is then a stop of Tab, so that the arrow keys scroll it to its end, which
 * a keyboard could not reach. Called when the line is shown or hidden, and when the window changes. */
function clearOfError() {
  const box = $("error");
  const covered = box.hidden ? 0 : box.offsetHeight + parseFloat(getComputedStyle(box).top || "0");
  document.documentElement.style.scrollPaddingTop = covered ? `${Math.ceil(covered) + 8}px` : "";
  if (!box.hidden && box.scrollHeight > box.clientHeight) box.tabIndex = 0;
  else box.removeAttribute("tabindex");
}

let saying = Promise.resolve(); // the announcements, said one after another in the order they were made

/** Says ``text`` to a screen reader, once: what an action ended with (a search's count, a task's state, an answer),
 * and that slow work began ("answering…"). The status lines themselves are not live regions, since some count
 * seconds while work goes on. Said in order: an outcome never comes before its "running…", nor is replaced by it. */
function announce(text) {
  const region = $("announcer");
  saying = saying.then(() => new Promise((said) => {
    region.textContent = "";
    window.setTimeout(() => { // the same words twice are announced twice
      region.textContent = text;
      said();
    }, 50);
  }));
}

/** Whether the keyboard's place was lost: the button it was on was switched off, hidden or replaced, which leaves
 * the focus on the page's body, and the next Tab starts again from the top. */
const focusLost = () => !document.activeElement || document.activeElement === document.body;

/** A box (required) of only spaces and blank lines holds nothing to send: the browser refuses its form's submit
 * with ``message``, as it refuses an empty box, focused; nothing is sent, where the submit did nothing at all or
 * the service answered with its API's field names. Called as the box's text changes, typed or set by the page. */
function requireText(box, message) {
  box.setCustomValidity(box.value.trim() || !box.value ? "" : message);
}

/** A button's place in its row: its cell (the cell's ``data-column``, else its index) and its position among the
 * cell's buttons, so that "share" and the "make private" that replaces it, or two rows' delete buttons, match. */
function buttonPlace(button) {
  const cell = button.closest("td");
  if (!cell) return null;
  return `${cell.dataset.column ?? cell.cellIndex}/${[...cell.querySelectorAll("button")].indexOf(button)}`;
}

/** A row's ``data-*`` attribute, the key it is found again by once the table is drawn again. */
const rowKey = (row) => [...row.attributes].find((a) => a.name.startsWith("data-"));

/** The button of ``row`` (found again in ``container`` by its key) that stands where ``place`` is, else null. */
function buttonAt(container, key, place) {
  const row = container.querySelector(`tr[${key.name}="${CSS.escape(key.value)}"]`);
  return row ? [...row.querySelectorAll("button")].find((b) => buttonPlace(b) === place) || null : null;
}

/** Redraws part of the page (``render``) keeping the keyboard's place: a button it replaced gives the focus to its
 * successor in the same row (the row's ``data-*``): the button of the same label, else the one in the same place
 * (share become make private, cancel become delete), else the row's first. */
function keepingFocus(container, render) {
  const had = document.activeElement;
  const inside = had && had !== document.body && container.contains(had);
  const row = inside ? had.closest("tr") : null;
  const key = row ? rowKey(row) : null;
  const place = inside ? buttonPlace(had) : null;
  render();
  if (!inside || had.isConnected || !key) return;
  const successor = container.querySelector(`tr[${key.name}="${CSS.escape(key.value)}"]`);
  const buttons = successor ? [...successor.querySelectorAll("button")] : [];
  const same = buttons.find((b) => b.getAttribute("aria-label") === had.getAttribute("aria-label"))
    || buttons.find((b) => place !== null && buttonPlace(b) === place);
  (same || buttons[0])?.focus();
}

/** Runs ``remove`` (async), which deletes the row of the focused button in ``table`` and draws the table again;
 * then, the focus lost with the row, gives it to the same button of the next row, else of the row before, else to
 * ``fallback`` (the tab): the keyboard's place is not the page's body. */
async function keepingFocusOnRemoval(table, remove, fallback) {
  const had = document.activeElement;
  const row = had && had !== document.body && table.contains(had) ? had.closest("tr") : null;
  const place = row ? buttonPlace(had) : null;
  const keyed = (rows) => rows.map(rowKey).filter(Boolean); // (a row of passages opened under its own has none)
  const all = row ? [...row.parentNode.rows] : [];
  const after = keyed(all.slice(all.indexOf(row) + 1));
  const before = keyed(all.slice(0, all.indexOf(row)).reverse());
  await remove();
  if (!row || !focusLost()) return;
  for (const key of [...after, ...before]) {
    const button = buttonAt(table, key, place);
    if (button) return button.focus();
  }
  fallback?.focus();
}

/** Runs an action, showing its error (if any) in the alert box instead of losing it in the console. A user's
 * action clears the previous error first; a background refresh (``clear: false``) leaves it to be read.
 * ``focus`` ({fields, fallback}: a field's ``param``, or "steps.*" for all under steps, to its element's id, and an
 * id): after an error, the focus on the field it names, else on ``fallback``, the box the user typed in; it was on
 * the button the action switched off while it ran, which left it on the page's body, and a keyboard user started
 * again from the top. */
async function guarded(action, {clear = true, focus = null} = {}) {
  if (clear) showError("");
  try {
    return await action();
  } catch (err) {
    if (err instanceof StaleKeyError) return undefined;
    showError(err instanceof ApiError ? err.message : `unexpected: ${err.message}`);
    const id = focus && err.param && (focus.fields[err.param] || focus.fields[`${String(err.param).split(".")[0]}.*`]);
    const field = id ? $(id) : null; // "steps.*": every field under steps (steps.fused.op)
    if (field) { // the field is marked wrong, and the error box read as its description
      field.setAttribute("aria-invalid", "true");
      field.setAttribute("aria-describedby", "error");
    }
    if (focus) (field || $(focus.fallback)).focus();
    return undefined;
  }
}

/** An option of a choice, off with its ``reason`` as its title when there is one (a flow the service cannot run;
 * its `backticks` left out: a tooltip shows no code). */
function choice(value, label, reason, attrs = {}) {
  return el("option", {...attrs, value, disabled: Boolean(reason), title: withoutBackticks(reason || "")}, label);
}

/** ``name`` if the service takes it as a flow's or an index's name (flows/store.py, serve/indices/indices.py), else an
 * error saying what it takes, naming ``field``: a "/", "..", "?" or space would make another path than the one
 * meant. */
function checkedName(name, what, field = "name") {
  if (!name) throw new ApiError(`enter ${what === "index" ? "an" : "a"} ${what} name`, {param: field});
  const most = what === "index" ? 64 : 100;
  if (!new RegExp(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,${most - 1}}$`).test(name)) {
    throw new ApiError(`'${name}' is not a valid ${what} name (field: ${field}): letters, digits, "_", "." and "-", `
      + `starting with a letter or digit, at most ${most} characters`, {param: field}); // the focus goes there
  }
  return name;
}

/** Draws a conversation again (``render``), keeping its message ``box``, under it, in view if it was: the answer to
 * a question sent from the box is followed as it is written (the page grew under the window, and the answer and
 * the box went out of sight), while someone who scrolled up to read an earlier turn is left there. */
function keepingInView(box, render) {
  const shown = box.getBoundingClientRect();
  const inView = shown.bottom > 0 && shown.top < window.innerHeight; // (a hidden tab's box: 0 and 0, not in view)
  render();
  if (inView) box.scrollIntoView({block: "nearest"});
}

/** Shows ``label`` and the seconds since it began in ``node`` until the returned function is called: slow work
 * (a model writing an answer) visibly goes on, and a screen reader is told once that it began. The seconds are
 * counted on ``performance.now()``, which no clock setting moves: on ``Date.now()``, a computer's clock set back an
 * hour meanwhile (by hand, or by a time server) made it "answering… -3599 s". */
function ticking(node, label) {
  announce(label); // once, without the seconds: a screen reader heard nothing from Send until the answer came
  const started = performance.now();
  const show = () => { node.textContent = `${label} ${Math.round((performance.now() - started) / 1000)} s`; };
  show();
  const timer = setInterval(show, 1000);
  return () => clearInterval(timer);
}

/** A request answered with server-sent events: its response, for ``readEvents``, or its refusal thrown as ``call``
 * throws one (a 401 saying where the key goes). */
async function openStream(method, path, body, signal) {
  const sentKey = typedKey();
  const response = await send(method, path, body, signal);
  // a body that is no JSON ("Invalid HTTP request received.", a proxy's 503) was thrown away: "HTTP 400: null"
  if (!response.ok) refuse(response, await readBody(response), sentKey);
  return response;
}

/** Reads ``openStream``'s response, calling onData with each event's data parsed as JSON, until [DONE] or the end;
 * an error event throws. */
async function readEvents(response, onData) {
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
