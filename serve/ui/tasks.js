"use strict";
// The Tasks tab: the caller's tasks a page at a time, one task followed until it ends and its rows shown per query,
// and questions about a finished task's rows (mosaicRAG's /task/chat).

const POLL_MS = 700; // a task's progress is read again this often
const TASK_ROWS_PER_QUERY = 50; // a task's rows shown per query

let followed = null; // the task whose progress is shown
let keptBy = new Map(); // task id -> the index whose latest ingestion it is (GET /v1/indices): not deletable

/** The newest page of the caller's tasks (GET /tasks answers newest first, a page at a time) and the counts. */
async function refreshTasks() {
  const [listing, indices] = await Promise.all([call("GET", "tasks"), call("GET", "v1/indices").catch(() => ({indices: []}))]);
  // (the indices unread, a delete is offered as before: the service refuses it, saying why)
  keptBy = new Map(indices.indices.filter((ix) => ix.ingest_task).map((ix) => [ix.ingest_task, ix.name]));
  $("task-counts").textContent = Object.entries(listing.counts).map(([state, n]) => `${n} ${state}`).join(", ")
    || "no tasks yet";
  keepingFocus($("task-table"), () => $("task-table").tBodies[0].replaceChildren(...listing.tasks.map(taskRow)));
  offerOlder(listing.next);
}

/** A button after the counts while older tasks remain: it adds the next page (``before``: the page's ``next``). It is
 * off while that page loads (a double click added the page twice), and a page that comes once the list was read again
 * (the button gone with the old list) is dropped: it would follow a list no longer shown. */
function offerOlder(next) {
  $("task-counts").querySelector(".older")?.remove();
  if (!next) return;
  const button = el("button", {type: "button", class: "link"}, "older tasks");
  button.onclick = () => guarded(async () => {
    button.disabled = true;
    try {
      const page = await call("GET", `tasks?before=${encodeURIComponent(next)}`);
      if (!button.isConnected) return;
      $("task-table").tBodies[0].append(...page.tasks.map(taskRow));
      offerOlder(page.next);
    } finally {
      button.disabled = false;
    }
  });
  $("task-counts").append(el("span", {class: "older"}, " ", button));
}

const SHORT_ID = 8; // a task id's first characters, as the table shows it (whole in its title and the task's view)

function taskRow(task) {
  // the whole 32-character id took a narrow window's width: status and cancel were off screen; its name begins
  // with what it shows, so that one who says "click 2270e390" reaches it
  const short = task.id.slice(0, SHORT_ID);
  const follow = el("button", {type: "button", class: "link", title: task.id,
    "aria-label": `${short}: follow task ${task.id}`, onclick: () => followTask(task.id, {push: true})}, short);
  // each cell names its column: below 40rem a row is a card (style.css), as a hit is, not a row to scroll sideways
  const cell = (column, content, attrs = {}) => el("td", {...attrs, "data-column": column}, content);
  return el("tr", {"data-task": task.id},
    cell("task", follow), cell("flow", task.flow || ""),
    cell("status", task.status, {class: `state ${task.status}`}),
    cell("steps done", stepsDone(task.steps_done, task.steps_total)), cell("created", when(task.created)),
    cell("actions", taskAction(task.id, task.status)));
}

/** "3 / 5": a task's steps done of its steps (GET /tasks's ``steps_done`` and ``steps_total``, or a progress
 * object's ``pipeline_progress``, "3/5"). */
const stepsDone = (done, total) => (total === undefined || total === null ? String(done ?? "") : `${done} / ${total}`);

const unfinished = (status) => status === "queued" || status === "running";

/** A task's button in the list: cancel while it is queued or running, then delete; off, saying why in its title,
 * for an index's latest ingestion, which the service keeps with the index (a confirm came before its 409). */
function taskAction(taskId, status) {
  if (unfinished(status)) {
    return el("button", {type: "button", "aria-label": `cancel task ${taskId}`, onclick: () => cancelTask(taskId)},
      "cancel");
  }
  const index = keptBy.get(taskId);
  return index !== undefined
    ? el("button", {type: "button", disabled: true, "aria-label": `delete task ${taskId}`, title: `the latest `
      + `ingestion of the index '${index}', kept with it: delete the index on the Indices tab to remove it`}, "delete")
    : el("button", {type: "button", title: "deletes the task, its result and its chats",
      "aria-label": `delete task ${taskId}`, onclick: () => deleteTask(taskId)}, "delete");
}

const pause = () => new Promise((resolve) => setTimeout(resolve, POLL_MS));

/** A stored time (seconds since the epoch) in the browser's locale and zone, naming the zone ("GMT+13:45"): without
 * it, a time read by a user in another zone (a shared screen, a pasted report) was hours off with nothing to say so. */
function when(seconds) {
  return typeof seconds === "number"
    ? new Date(seconds * 1000).toLocaleString(undefined, {timeZoneName: "short"}) : String(seconds || "");
}

/** Cancels an unfinished task (GET /task/cancel/{id}) once confirmed, as a delete is: its work stops for good. */
async function cancelTask(taskId) {
  if (!window.confirm(`Cancel the task ${taskId}? Its work stops and cannot be resumed.`)) return;
  await guarded(() => call("GET", `task/cancel/${encodeURIComponent(taskId)}`));
  await guarded(refreshTasks, {clear: false});
}

/** Deletes an ended task (DELETE /task/{id}) and, if it is the one shown, its view and chat. */
async function deleteTask(taskId) {
  if (!window.confirm(`Delete the task ${taskId}, its result and its chats?`)) return;
  await keepingFocusOnRemoval($("task-table"), () => guarded(async () => {
    await call("DELETE", `task/${encodeURIComponent(taskId)}`);
    taskChats.delete(taskId);
    taskRows.delete(taskId);
    taskDrafts.delete(taskId);
    if (followed === taskId) {
      dropFollowed();
      rememberTab();
    }
    await refreshTasks();
  }), $("tabbutton-tasks"));
}

/** No task followed: its view and its chat gone (the task deleted, or Back to the list alone, #tasks). */
function dropFollowed() {
  followed = null;
  $("task-detail").replaceChildren();
  $("task-chat-form").hidden = true;
  $("task-chat-log").replaceChildren();
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
  for (const asked of result.queries || []) { // every query the task ran, in order: one that found nothing too
    query(String(asked.qid)).text = String(asked.query);
  }
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
    el("progress", {max: 100, value: progress.pipeline_percentage, "aria-label": "task progress"}),
    el("span", {class: "status"}, ` ${progress.pipeline_progress} steps`),
    el("ul", {class: "steps"}, ...steps),
    body.error ? el("p", {class: "bad"}, body.error) : null,
    // what it did in a line ("4 document(s) into index 'notes' as 4 passage(s)"): an ingestion shows no rows
    body.result && body.result.result_description && body.result.result_description.text
      ? el("p", {class: "status outcome"}, body.result.result_description.text) : null,
    ...queries.map(taskQuery),
    progress.log ? el("details", {}, el("summary", {}, "log"), el("pre", {}, progress.log)) : null));
}

/** The list's row of the task followed, as its progress says (its status, steps done, its button): the list is read
 * again when the task ends, and until then said "queued" of a task running, and "cancel" of one that had ended. */
function updateTaskRow(body) {
  const row = $("task-table").querySelector(`tr[data-task="${CSS.escape(body.task_id)}"]`);
  if (!row) return;
  const status = row.querySelector('td[data-column="status"]');
  status.textContent = body.status;
  status.className = `state ${body.status}`;
  row.querySelector('td[data-column="steps done"]').textContent = stepsDone(
    ...body.progress.pipeline_progress.split("/"));
  const actions = row.querySelector('td[data-column="actions"]');
  const shown = actions.querySelector("button");
  // replaced only when cancel becomes delete: a button drawn again at every poll took the keyboard's focus away
  if (!shown || unfinished(body.status) !== shown.textContent.startsWith("cancel")) {
    keepingFocus(row.parentNode, () => actions.replaceChildren(taskAction(body.task_id, body.status)));
  }
}

/** Run as a task's new task, shown queued at once, before the tab opens (its heading, and its URL then): the tab
 * showed the task followed before until the list and the new task's first poll had come. */
function showQueued(taskId) {
  dropFollowed();
  followed = taskId;
  $("task-detail").replaceChildren(el("article", {class: "result", "data-task": taskId},
    el("h2", {}, `task ${taskId}: queued`)));
}

/** Shows task ``taskId`` and follows it until it ends; ``push``: opened from the list, a new entry of the browser's
 * history (Back goes back to the list). */
async function followTask(taskId, {push = false} = {}) {
  followed = taskId;
  rememberTab("tasks", {push}); // #tasks/<id>: a reload or a link opens this task again
  showTaskChat(taskId, false);
  let said = null;
  const shown = (body) => {
    renderProgress(body);
    updateTaskRow(body);
    if (body.status !== said) { // said once a state, not at every poll
      said = body.status;
      announce(`task ${body.task_id.slice(0, SHORT_ID)}: ${said}`);
    }
  };
  const body = await guarded(() => finished(taskId, shown, () => followed === taskId), {clear: false});
  if (!body) return; // the poll failed (the error is shown), or another task is followed now
  shown(body);
  if (body.status === "finished" && body.result.data.length) { // an ingestion has no rows to ask about
    taskRows.set(taskId, body.result.data);
    await guarded(() => readTaskChat(taskId), {clear: false});
    if (followed !== taskId) return; // another task was opened meanwhile
    showTaskChat(taskId, true);
  }
  await guarded(refreshTasks, {clear: false});
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

const taskChats = new Map(); // task id -> {chatId, turns}
const taskRows = new Map(); // task id -> its result rows (the sources' titles)
const asking = new Set(); // the tasks whose answer is being written: their Ask is off, another task's is not
const taskDrafts = new Map(); // task id -> what was typed in its box when another task was opened

/** The task's conversation as the service kept it (GET /task/{id}/chats), unless the page holds it: its latest chat
 * that has messages, which the next question continues. A reload, or the page opened again, lost it before. */
async function readTaskChat(taskId) {
  if (taskChats.has(taskId)) return;
  const {chats} = await call("GET", `task/${encodeURIComponent(taskId)}/chats`);
  const chat = chats.filter((c) => c.messages.length).pop();
  if (!chat || taskChats.has(taskId)) return; // none, or one asked in this page meanwhile
  const turns = [];
  for (let i = 0; i + 1 < chat.messages.length; i += 2) { // kept in pairs: the question, then its reply
    const [question, reply] = [chat.messages[i], chat.messages[i + 1]];
    turns.push({question: question.content, answer: reply.answer, sources: reply.sources || [],
      askedAs: reply.standalone_query, unanswered: reply.answered === false});
  }
  taskChats.set(taskId, {chatId: chat.id, turns});
}

function showTaskChat(taskId, finished) {
  const form = $("task-chat-form");
  if (form.dataset.task !== taskId) { // a question typed for one task is not asked of the next one opened
    if (form.dataset.task) taskDrafts.set(form.dataset.task, $("task-chat-input").value);
    $("task-chat-input").value = taskDrafts.get(taskId) || "";
    requireText($("task-chat-input"), BLANK_MESSAGE); // this task's draft, checked, not the last one's spaces
    taskDrafts.delete(taskId);
  }
  form.hidden = !finished;
  form.dataset.task = taskId;
  $("task-chat-send").disabled = asking.has(taskId);
  renderTaskChat(taskId);
}

const shownTask = () => $("task-chat-form").dataset.task;

/** The chat's turns, if its task is the one shown (an answer still being written for a task left for another
 * was drawn under that other task's results); `pending` ({question, text}): a question whose answer is being
 * written. */
function renderTaskChat(taskId, pending) {
  if (shownTask() !== taskId) return;
  const rows = taskRows.get(taskId) || [];
  const turns = (taskChats.get(taskId) || {turns: []}).turns.map((turn) => el("div", {class: "task-turn"},
    el("div", {class: "turn user"}, el("pre", {dir: "auto"}, turn.question)),
    // a reply that is no answer ("No answer could be written (...)") lists no sources: they would read as its support
    answerView(turn.answer, turn.unanswered ? [] : sourceNames(turn.sources, rows), {unanswered: turn.unanswered}),
    // a follow-up is asked with the chat before it (query.contextualize)
    turn.askedAs ? searchedLine("asked as", turn.askedAs) : null));
  if (pending) turns.push(el("div", {class: "task-turn"}, el("div", {class: "turn user"}, el("pre", {dir: "auto"}, pending.question)),
    el("div", {class: "turn assistant pending"}, el("pre", {dir: "auto"}, pending.text || "…"))));
  keepingInView($("task-chat-input"), () => $("task-chat-log").replaceChildren(...turns));
}

async function askTask(event) {
  event.preventDefault();
  const taskId = $("task-chat-form").dataset.task;
  const message = $("task-chat-input").value.trim();
  if (asking.has(taskId)) return; // its Ask is off while its answer is written
  if (!message) { // the box's own check refuses it first (requireText): said, not a submit that does nothing
    requireText($("task-chat-input"), BLANK_MESSAGE);
    $("task-chat-input").reportValidity();
    return;
  }
  asking.add(taskId);
  $("task-chat-send").disabled = true;
  announce("answering…"); // as the Chat tab's Send says it (api.js ticking)
  try {
    await guarded(async () => {
      if (!taskChats.has(taskId)) {
        const chatId = await call("GET", `task/chat/new?task_id=${encodeURIComponent(taskId)}`);
        taskChats.set(taskId, {chatId: chatId.trim(), turns: []});
      }
      const chat = taskChats.get(taskId);
      // the question in a JSON body: in the URL, a long non-ASCII one was refused before the service read it
      const path = `task/chat/${encodeURIComponent(chat.chatId)}`;
      let written = "";
      let reply = null;
      renderTaskChat(taskId, {question: message, text: ""});
      await readEvents(await openStream("POST", path, {message, stream: true}), (data) => {
        if (data.text !== undefined) renderTaskChat(taskId, {question: message, text: (written += data.text)});
        else reply = data; // the whole reply, once the flow has run
      });
      if (!reply) throw new ApiError("the service ended the answer without a reply");
      chat.turns.push({question: message, answer: reply.answer, sources: reply.sources || [],
        askedAs: reply.standalone_query, unanswered: reply.answered === false});
      if (shownTask() === taskId) $("task-chat-input").value = ""; // not what was typed for another task meanwhile
      else if (taskDrafts.get(taskId) === message) taskDrafts.delete(taskId); // asked: not a draft to come back to
      renderTaskChat(taskId);
      announce(`answer: ${reply.answer}`);
    }, {focus: {fields: {}, fallback: "task-chat-input"}});
  } finally {
    asking.delete(taskId);
    if (shownTask() === taskId) $("task-chat-send").disabled = false;
    if (focusLost() && shownTask() === taskId) $("task-chat-input").focus(); // Ask was off while it was written
    renderTaskChat(taskId); // the answered turns: a refused question leaves none
  }
}
