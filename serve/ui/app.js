"use strict";
// The page itself, its last script: the tabs, the health badge, the Models tab, the API key (another key forgets
// everything the previous one was shown), and the events wired to the other scripts' functions once it has loaded.

const KEY_STORE = "tessera.apiKey";
const HEALTH_POLL_MS = 3000; // while the service is not ready, /healthz is asked again this often
const HEALTH_READY_POLL_MS = 30000; // and once it is, this often while the page is in view (and when it comes back)
const TABS = ["search", "chat", "tasks", "flows", "indices", "models"];

const onShow = {
  tasks: () => refreshTasks(), models: () => loadModels(), chat: () => loadChatModels(), flows: () => loadFlowList(),
  indices: () => loadIndices(),
};

/** The URL's #part for tab ``name``: the Tasks tab with the task it shows (#tasks/<id>). */
const tabHash = (name) => (name === "tasks" && followed ? `#tasks/${followed}` : `#${name}`);

let openedHash = null; // the URL's #part the page shows: Back and Forward fire both popstate and hashchange

/** The tab shown, with its task, in the URL, so that a reload or a shared link opens them again; ``push``: as a new
 * entry of the browser's history (a tab or a task the user opened), so that Back goes to the one before. */
function rememberTab(name = shownTab(), {push = false} = {}) {
  if (window.location.hash !== tabHash(name)) {
    if (push) window.history.pushState(null, "", tabHash(name));
    else window.history.replaceState(null, "", tabHash(name));
  }
  openedHash = window.location.hash;
}

/** Opens tab ``name``: its panel shown, its tab selected, and (``remember``) it in the URL (#chat) as an entry of
 * the browser's history. It resolves once the tab's data is read (the Tasks tab's list). */
function showTab(name, {remember = true} = {}) {
  for (const button of document.querySelectorAll('nav [role="tab"]')) {
    const selected = button.dataset.tab === name;
    button.setAttribute("aria-selected", String(selected));
    button.tabIndex = selected ? 0 : -1; // the tab list is one stop for Tab; the arrow keys move inside it
  }
  for (const section of document.querySelectorAll("main > section")) section.hidden = section.id !== `tab-${name}`;
  if (remember) rememberTab(name, {push: true});
  return onShow[name] ? guarded(onShow[name]) : Promise.resolve();
}

/** The tab the URL names (#tasks, #tasks/<id>), or null. */
function tabInUrl() {
  const name = window.location.hash.slice(1).split("/")[0];
  return TABS.includes(name) ? name : null;
}

/** The tab and the task the URL names, opened (a reload, a link, the address changed, Back or Forward): the first
 * tab where it names none (Back to the page as it was loaded); #tasks alone, the list with no task followed. */
function openUrl() {
  if (window.location.hash === openedHash) return; // Back fires popstate, then hashchange: opened once
  openedHash = window.location.hash;
  const tab = tabInUrl() || TABS[0];
  showTab(tab, {remember: false});
  const task = window.location.hash.match(/^#tasks\/([0-9A-Za-z_-]+)$/); // a task id: uuid4().hex
  if (task && task[1] !== followed) followTask(task[1]);
  else if (tab === "tasks" && !task && followed) dropFollowed();
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

let healthTimer = null;
let healthSoon = false; // whether healthTimer is the few seconds' read of a service not ready
let wasUnreachable = false; // a request got no answer: once the service answers again, the page reads its lists

/** The health badge; while the service is not ready (models loading, or no answer) it is read again every few
 * seconds, until it is, then every half minute while the page is in view, so that a badge left open does not say
 * "ready" of a service that has since stopped or lost its task store. Back after no answer, the lists a failed
 * request left empty are read again and the "did not answer" error, no longer true, goes. */
async function checkHealth() {
  clearTimeout(healthTimer);
  healthTimer = null;
  const ready = await readHealth();
  clearTimeout(healthTimer); // a request that failed meanwhile may have set one
  healthSoon = !ready;
  const inView = document.visibilityState === "visible"; // a hidden page is read again when it is shown
  healthTimer = !ready ? setTimeout(checkHealth, HEALTH_POLL_MS)
    : inView ? setTimeout(checkHealth, HEALTH_READY_POLL_MS) : null;
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
  if (healthSoon) return; // read again in a few seconds already
  clearTimeout(healthTimer); // the half-minute read of a ready service, brought forward
  healthSoon = true;
  healthTimer = setTimeout(checkHealth, HEALTH_POLL_MS);
}

/** GET /healthz into the badge (its reason in the badge's title); whether the service is ready. */
async function readHealth() {
  const badge = $("health");
  const response = await send("GET", "healthz").catch(() => null);
  if (!response) {
    wasUnreachable = true;
    badge.textContent = "not reachable";
    badge.className = "badge bad";
    badge.title = "the service's health check: no answer";
    return false;
  }
  const body = await response.json().catch(() => ({}));
  if (response.ok) {
    badge.textContent = "ready";
    badge.className = "badge ok";
    badge.title = "the service's health check";
    return true;
  }
  const error = (body && body.error) || {}; // a 503 of Serve's proxy, before the app is up, is text: starting
  if (error.param) { // a check that failed (task_store, tessera_home): waiting will not mend it
    badge.textContent = `not ready: ${error.param}`;
    badge.className = "badge bad";
  } else { // the models not loaded yet (a missing one never loads, and holds nothing back)
    const waiting = Object.entries(error.models || {}).filter(([, state]) => !["ready", "missing"].includes(state))
      .map(([name]) => name);
    badge.textContent = waiting.length ? `starting: ${waiting.join(", ")}` : "starting";
    badge.className = "badge wait";
  }
  badge.title = error.message || `the service's health check: HTTP ${response.status}`;
  return false;
}

async function loadModels() {
  const models = await call("GET", "v1/models");
  const body = $("model-table").tBodies[0];
  // cells that name their column: in a narrow window a model is a card, its reason under it (style.css)
  body.replaceChildren(...models.data.map((m) => el("tr", {"data-model": m.id}, columnCell("id", m.id),
    columnCell("type", m.type || ""), columnCell("status", m.status || ""),
    columnCell("why not ready", ...withCode(m.reason ? inPageReason(m.reason) : "")))));
}

/** Ctrl+Enter (Cmd+Enter on a Mac) in a box where Enter starts a new line (a message, the queries) submits its
 * form, as its submit button does, and not while that button is off (a search or an answer running), as Enter in a
 * one-line field does not: ``requestSubmit`` would submit all the same. */
function submitOnCtrlEnter(event) {
  if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
  event.preventDefault();
  const form = event.target.form;
  if ([...form.querySelectorAll('[type="submit"]')].some((button) => button.disabled)) return;
  form.requestSubmit();
}

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

/** Everything shown or held from the previous key's calls, gone: the new key sees only what its own calls give. */
function forgetKeyData() {
  keyEpoch += 1;
  newChat();
  if (followed) {
    followed = null;
    rememberTab(); // the URL names no task of the other key
  }
  taskChats.clear();
  taskRows.clear();
  taskDrafts.clear();
  $("task-chat-input").value = "";
  $("task-chat-form").dataset.task = "";
  flowSpec = null;
  dropSearch(); // its answer was for the other key
  indexListing = {indices: [], read_only: {}, specs: [], limits: {}};
  offerDocumentDeletion(); // the other key's read-only indices are not this one's
  $("flow").dataset.chosen = $("flow").value || $("flow").dataset.chosen || "";
  for (const id of ["results", "task-detail", "task-chat-log", "chat-log", "flow-list", "flow", "chat-model",
    "all-indices", "own-indices", "flow-description"]) $(id).replaceChildren();
  for (const id of ["task-table", "index-table", "doc-table", "model-table"]) $(id).tBodies[0].replaceChildren();
  for (const id of ["search-status", "task-counts", "upload-status", "delete-docs-status", "flow-status",
    "doc-heading"]) $(id).textContent = "";
  fillEditor("", ""); // a saved flow of the other key
  offerDelete();
  $("task-chat-form").hidden = true;
  $("index-documents").hidden = true;
  $("flows-off").hidden = true;
  updateSearchButtons();
}

/** Leaving the page (a reload, a closed tab, a link) asks first while it holds work found nowhere else: a spec
 * edited in the Flows tab and not saved, or an upload whose remaining parts this page sends (they went unsent, and
 * the edit was gone, without a word). The browser asks in its own words. */
function askBeforeLeaving(event) {
  if (specChanged() || uploading) event.preventDefault();
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
  document.querySelector('[role="tablist"]').addEventListener("keydown", moveTab);
  window.addEventListener("hashchange", openUrl);
  window.addEventListener("popstate", openUrl); // Back, Forward: pushState's entries fire no hashchange
  window.addEventListener("resize", clearOfError); // the error line wraps to another height
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") checkHealth();
  });
  $("search-form").addEventListener("submit", search);
  $("flow").addEventListener("change", () => guarded(describeFlow));
  $("enqueue-button").addEventListener("click", enqueue);
  $("chat-form").addEventListener("submit", sendChat);
  $("chat-input").addEventListener("keydown", submitOnCtrlEnter);
  $("queries").addEventListener("keydown", submitOnCtrlEnter);
  $("queries").addEventListener("input", requireAQuery);
  for (const id of ["chat-input", "task-chat-input"]) {
    $(id).addEventListener("input", () => requireText($(id), BLANK_MESSAGE));
  }
  // the browser refused a submit (a field's own check): the error of the last action is not this one's
  document.addEventListener("invalid", () => showError(""), true);
  $("chat-stop").addEventListener("click", stopChat);
  $("flow-form").addEventListener("submit", saveFlow);
  $("flow-spec").addEventListener("input", () => { // edited: no longer the spec the error was about
    $("flow-spec").removeAttribute("aria-invalid");
    $("flow-spec").removeAttribute("aria-describedby");
  });
  $("task-chat-form").addEventListener("submit", askTask);
  $("flow-delete").addEventListener("click", deleteFlow);
  $("flow-name").addEventListener("input", offerDelete); // off for a built-in flow's name
  $("flow-use").addEventListener("click", useFlow);
  $("upload-form").addEventListener("submit", upload);
  $("delete-docs-form").addEventListener("submit", deleteDocuments);
  $("delete-docs-index").addEventListener("input", offerDocumentDeletion); // off for a read-only index
  $("chat-clear").addEventListener("click", newChat);
  for (const id of ["chat-model", "chat-index"]) $(id).addEventListener("change", keepChat); // kept for a reload
  $("chat-model").addEventListener("change", offerChatIndex); // off for a language model, which reads no index
  window.addEventListener("beforeunload", askBeforeLeaving);
  window.addEventListener("pagehide", () => { leavingPage = true; }); // before the answer's fetch is cut
  window.addEventListener("pageshow", () => { leavingPage = false; }); // (back from the browser's page cache)
  updateSearchButtons(); // Search and Run as a task off until the flow list has come (index.html has them off)
  restoreChat(); // the Chat tab's conversation of before a reload
  reload();
  openUrl();
});

