"use strict";
// The Search tab: the flow choice (with what each flow does), a search of one query a line, or the same body as a
// task followed under Tasks.

/** Why the service cannot run a flow of a GET /flows listing (its ``status``), in the page's words, or null when it
 * can. */
function whyNotRunnable(flows, name) {
  const status = (flows.status || {})[name];
  return status && !status.runnable ? inPageReason(status.reason || "the service cannot run it") : null;
}

/** The search tab's flow choice (``flows``: a listing already fetched, else GET /flows): a flow the service cannot
 * run (a benchmark's, a model not there) is listed, off, its reason its title and in the list under the form. */
async function loadFlows(flows) {
  flows = flows || await call("GET", "flows");
  const select = $("flow");
  const chosen = select.value || select.dataset.chosen || "hybrid"; // (chosen: before another key was typed)
  const option = (name) => {
    const why = whyNotRunnable(flows, name);
    return choice(name, why ? `${name} (cannot run here)` : name, why);
  };
  select.replaceChildren(el("optgroup", {label: "built-in"}, ...flows.builtin.map(option)),
    ...(flows.saved.length ? [el("optgroup", {label: "saved"}, ...flows.saved.map(option))] : []));
  const names = [...flows.builtin, ...flows.saved];
  const usable = names.filter((name) => !whyNotRunnable(flows, name));
  // a flow this key cannot see (another key's saved one): the default, not the list's first (answer_only, a model's)
  select.value = usable.includes(chosen) ? chosen : usable.includes("hybrid") ? "hybrid" : usable[0] || "";
  const off = names.filter((name) => whyNotRunnable(flows, name));
  $("flows-off").hidden = !off.length; // the reasons, for a keyboard or a phone, which open no tooltip
  $("flows-off").replaceChildren(el("summary", {}, `${off.length} flow(s) cannot run on this service`),
    el("ul", {}, ...off.map((name) => el("li", {"data-flow": name}, ...withCode(`${name}: ${whyNotRunnable(flows, name)}`)))));
  if (select.value) await describeFlow();
  else {
    $("flow-description").replaceChildren();
    updateSearchButtons(); // no flow to search with: Search stays off
  }
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

let searching = false; // a search is running: Search is off, and another search is not sent
let searchToken = 0; // counts the searches: an answer, status or end of any but the latest is not shown
let stopSearchTicking = () => {}; // the running search's "running bm25… 2 s"

/** Forgets the running search (another key was typed): its answer, when it comes, is not shown, its seconds stop
 * counting in the status line, and Search is on for the new key. */
function dropSearch() {
  searchToken += 1;
  stopSearchTicking();
  searching = false;
}

/** Where a refused search puts the focus: the field its error names, else the queries. */
const SEARCH_FOCUS = {fields: {index: "index", top_k: "top-k", flow: "flow"}, fallback: "queries"};

let enqueueing = false; // Run as a task's request is on its way: the button is off, another task is not queued

/** What the page says when there is no flow to send: a search of the flow "" was the service's 422 listing every
 * flow. */
const NO_FLOW = "Choose a flow (field: flow): the list of flows has not loaded yet, or holds none this service can run";

/** Search off while a search runs, Run as a task while its task is queued, both for a flow that builds an index
 * (said below them), and both while no flow is chosen: until the flow list has come (the page opened without the
 * key, or another key typed, reads it again), a search would send no flow. */
function updateSearchButtons() {
  const unsearchable = readsDocuments(flowSpec);
  const noFlow = !$("flow").value;
  $("search-button").disabled = searching || unsearchable || noFlow;
  $("enqueue-button").disabled = enqueueing || unsearchable || noFlow;
  $("search-button").title = noFlow ? "no flow chosen: the list of flows has not loaded yet, or holds none this "
    + "service can run" : "";
  $("flow-warning").hidden = !unsearchable;
}

/** Refuses, in the page, a search or task without a flow (a submit the buttons being off did not stop); whether it
 * did. */
function refusedWithoutFlow(body) {
  if (body.flow) return false;
  guarded(() => { throw new ApiError(NO_FLOW, {param: "flow"}); }, {focus: SEARCH_FOCUS});
  return true;
}

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

/** A refusal of the Search (or Chat) tab's ``index`` (its ``param``) said in the page's words when what was typed is a bare
 * name outside an index name's rules ("my notes") and not listed: the service's "does not exist" said not why. Not
 * checked before it is sent, as the Indices tab's names are: the field also takes a path to an index
 * (docs/serving.md), a folder that ``tessera ingest`` named so is listed and searched, and a flow that reads no
 * index ignores it. */
function namingTheIndexRule(index) {
  return (err) => {
    const bare = index && !index.includes("/") && !index.startsWith("~") && index !== "." && index !== "..";
    const listed = indexListing.indices.some((ix) => ix.name === index); // refused for another reason
    if (err instanceof ApiError && err.param === "index" && err.status < 500 && bare && !listed) {
      checkedName(index, "index", "index");
    }
    throw err;
  };
}

function renderResults(results, spec) {
  $("results").replaceChildren(...results.map((r) => el("article", {class: "result", "data-qid": r.qid},
    queryHeading(r.query), ...queryBlocks(r.metadata || {}, r.hits, spec))));
}

async function search(event) {
  event.preventDefault();
  // one search at a time, as the Search button (off while one runs) says: Ctrl+Enter in the box or a second submit
  // sent the same search again, or another one, whose answer the slower first one's then replaced
  if (searching) return;
  const body = flowBody();
  if (refusedWithoutFlow(body)) return;
  const spec = flowSpec;
  const token = ++searchToken;
  const latest = () => token === searchToken; // else another key dropped it: its answer is not shown
  $("results").replaceChildren(); // the previous search's results are not this one's, whatever this one gives
  searching = true;
  updateSearchButtons();
  const stopTicking = ticking($("search-status"), `running ${body.flow}…`);
  stopSearchTicking = stopTicking;
  try {
    const answer = await guarded(() => call("POST", "v1/search", body).catch(namingTheIndexRule(body.index))
      .finally(() => {
        if (!latest()) throw new StaleKeyError(); // not its error either
      }), {focus: SEARCH_FOCUS});
    stopTicking();
    if (!latest()) return;
    if (!answer) {
      $("search-status").textContent = "";
      return;
    }
    const ms = answer.took_ms;
    const took = ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
    const count = `${answer.results.length} ${answer.results.length === 1 ? "query" : "queries"}`;
    $("search-status").textContent = `${answer.flow}: ${count} in ${took}`;
    renderResults(answer.results, spec);
    announce($("search-status").textContent);
  } finally {
    stopTicking();
    if (latest()) {
      searching = false;
      updateSearchButtons();
      // the Search button was off while it ran, which dropped the focus (some browsers keep it on the button): the
      // keyboard goes on from the results' line, not the page's top
      if (focusLost() || document.activeElement === $("search-button")) {
        $($("results").childElementCount ? "search-status" : "search-button").focus();
      }
    }
  }
}

/** The search as a task (POST /task/enqueue, the same body): it runs on Ray, followed under Tasks. The button is
 * off until the service has answered: a double click queued the same task twice. */
async function enqueue() {
  if (enqueueing || !$("search-form").reportValidity()) return;
  const body = flowBody();
  if (refusedWithoutFlow(body)) return;
  enqueueing = true;
  updateSearchButtons();
  let taskId;
  try {
    taskId = await guarded(() => call("POST", "task/enqueue", body).catch(namingTheIndexRule(body.index)),
      {focus: SEARCH_FOCUS});
  } finally {
    enqueueing = false;
    updateSearchButtons();
  }
  if (taskId) {
    // the list first: a task that ended on its first poll was drawn before its row came, which then said "queued";
    // meanwhile the tab shows the new task queued, not the one followed before (its heading, its URL)
    showQueued(taskId);
    await showTab("tasks");
    $("tabbutton-tasks").focus(); // the button pressed is on the hidden tab now
    followTask(taskId);
  }
}

/** A box of only spaces and blank lines holds no query: the browser refuses the submit, as for an empty box, rather
 * than the service answering with its API's field names. */
function requireAQuery(event) {
  requireText(event.target, "Type at least one query (one a line).");
}
