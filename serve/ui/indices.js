"use strict";
// The Indices tab: the indices a search can name, an index's documents, documents added (documents.js reads and
// batches them) or deleted, an index shared or deleted.

let indexListing = {indices: [], read_only: {}, specs: [], limits: {}}; // GET /v1/indices

async function loadIndices() {
  indexListing = await call("GET", "v1/indices");
  $("all-indices").replaceChildren(...indexListing.indices.filter((ix) => ix.name && !ix.default)
    .map((ix) => el("option", {value: ix.name})));
  const rows = indexListing.indices.map((ix) => el("tr", {"data-index": ix.name || ""},
    columnCell("index", ix.name || "(the default index)", ix.default && ix.name ? " (default)" : ""),
    columnCell("passages", ix.chunks), columnCell("encoder", ix.encoder || ""),
    columnCell("BM25", ix.bm25 === null ? "" : ix.bm25 ? "yes" : "no"), columnCell("yours", ix.writable ? "yes" : ""),
    columnCell("shared", ix.shared ? "yes" : "no"),
    columnCell("actions", ...indexButtons(ix))));
  keepingFocus($("index-table"), () => $("index-table").tBodies[0].replaceChildren(...rows));
  $("own-indices").replaceChildren(...indexListing.indices.filter((ix) => ix.writable)
    .map((ix) => el("option", {value: ix.name})));
  const select = $("upload-spec");
  const chosen = select.value || "ingest";
  select.replaceChildren(...indexListing.specs.map((spec) => el("option", {
    value: spec.name, disabled: Boolean(spec.missing), title: spec.missing || spec.description,
  }, spec.missing ? `${spec.name} (its model is missing)` : spec.name)));
  select.value = chosen;
  guarded(showIngestions, {clear: false}); // not waited for: the table is read, whatever the tasks' answer
  offerDocumentDeletion();
}

/** Why the caller may not change index ``name`` (GET /v1/indices' ``cannot_add``: no index at all, the service's
 * folder of indices being outside its roots; its ``read_only``: the default index, also by the name of its folder
 * where the table lists it without one, another key's, one the service did not make), else "". */
function readOnlyReason(name) {
  if (indexListing.cannot_add) return inPageWords(indexListing.cannot_add);
  const why = Object.hasOwn(indexListing.read_only || {}, name) ? indexListing.read_only[name] : "";
  return why ? inPageWords(`index '${name}' ${why}`) : "";
}

/** *Delete documents* off, its reason beside it, while the index box names an index the caller may not change: it
 * asked to confirm, then got the service's certain 403. */
function offerDocumentDeletion() {
  const why = readOnlyReason($("delete-docs-index").value.trim());
  $("delete-docs-button").disabled = Boolean(why);
  $("delete-docs-why").replaceChildren(...withCode(why)); // its `tessera ingest` as <code>, as the error line's
}

/** A table cell that names its column (as a task's do): a row drawn again gives the focus to the button in the same
 * place, and in a narrow window, where a row is a card (style.css), the cell says what it is. */
const columnCell = (column, ...content) => el("td", {"data-column": column}, ...content);

/** A row's buttons, each named for a screen reader with its index ("search my_notes"): "search" alone, read out of
 * the table, said not which. */
function indexButtons(ix) {
  const which = ix.name || "the default index";
  const button = (label, onclick, attrs = {}) => el("button", {type: "button", "aria-label": `${label} ${which}`,
    onclick, ...attrs}, label);
  return [
    button("search", () => searchIndex(ix)),
    ix.name ? button("documents", () => guarded(() => showDocuments(ix)), {"aria-label": `documents of ${which}`})
      : null,
    ix.writable ? button(ix.shared ? "make private" : "share", () => shareIndex(ix.name, !ix.shared),
      {title: ix.shared ? "only your key may search it" : "every key may search it"}) : null,
    ix.writable ? button("delete", () => deleteIndex(ix.name)) : null,
  ];
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
  await keepingFocusOnRemoval($("index-table"), () => guarded(async () => {
    await call("DELETE", `v1/indices/${encodeURIComponent(name)}`);
    if ($("index-documents").dataset.index === name) $("index-documents").hidden = true;
    await loadIndices();
  }), $("tabbutton-indices"));
}

const DOCUMENTS_PAGE = 100;

/** An index's documents, a page at a time (``offset`` > 0 adds the next page below the ones shown). */
async function showDocuments(ix, offset = 0) {
  const page = await call("GET", `v1/indices/${encodeURIComponent(ix.name)}/documents?offset=${offset}`
    + `&limit=${DOCUMENTS_PAGE}`);
  const rows = page.documents.map((doc) => el("tr", {"data-doc": doc.id},
    columnCell("document", openingDocument(ix, doc.id)), columnCell("title", doc.title),
    columnCell("metadata", Object.entries(doc.metadata).map(([name, value]) => `${name}: ${value}`).join(", ")),
    columnCell("passages", doc.passages),
    columnCell("actions", ix.writable ? el("button", {type: "button", "aria-label": `delete ${doc.id} from ${ix.name}`,
      onclick: () => deleteDocument(ix, doc.id)}, "delete") : null)));
  const body = $("doc-table").tBodies[0];
  if (offset === 0) body.replaceChildren(...rows);
  else body.append(...rows);
  const shown = offset + page.documents.length;
  $("doc-heading").textContent = `Documents of ${ix.name}: ${shown} of ${page.total}`;
  const more = $("doc-more");
  more.hidden = shown >= page.total;
  more.disabled = false;
  more.onclick = () => { // off while its page loads: a double click added the same page twice (300 rows of 200)
    if (more.disabled) return;
    more.disabled = true;
    guarded(() => showDocuments(ix, shown)).finally(() => { more.disabled = false; });
  };
  const panel = $("index-documents");
  panel.dataset.index = ix.name;
  panel.hidden = false;
}

/** A listed document's id as a button that opens, in a row under its own, its passages' text in order, and closes
 * it again: the listing carries no text, so it is read when opened (GET /v1/indices/{name}/documents/{id}), as a
 * hit's docno opens its other fields (views.js openingDocno). */
function openingDocument(ix, docId) {
  const button = el("button", {type: "button", class: "link", title: "the text of its passages"}, docId);
  button.setAttribute("aria-expanded", "false");
  let clicks = 0; // an answer that comes after a later click is not shown
  button.onclick = () => guarded(async () => {
    const click = ++clicks;
    const row = button.closest("tr");
    const open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    const opened = row.nextElementSibling;
    if (opened && opened.classList.contains("passages")) opened.remove();
    if (!open) return;
    try {
      const doc = await call("GET", `v1/indices/${encodeURIComponent(ix.name)}/documents/`
        + encodeURIComponent(docId));
      if (click !== clicks) return;
      row.after(el("tr", {class: "passages"}, el("td", {colSpan: row.cells.length},
        el("ol", {}, ...doc.passages.map((passage) => el("li", {"data-docno": passage.docno},
          el("span", {class: "docno"}, passage.docno), el("p", {}, passage.text)))))));
    } catch (err) {
      if (click === clicks) button.setAttribute("aria-expanded", "false");
      throw err;
    }
  });
  return button;
}

async function deleteDocument(ix, docId) {
  if (!window.confirm(`Delete the document '${docId}' from '${ix.name}'?`)) return;
  await keepingFocusOnRemoval($("doc-table"), () => guarded(async () => {
    await call("POST", `v1/indices/${encodeURIComponent(ix.name)}/delete`, {ids: [docId]});
    await afterDocumentsChanged(ix.name);
  }), $("tabbutton-indices"));
}

/** After the documents of index ``name`` changed: the index table again, and the documents panel if it shows
 * that index (its first page, since what was added or deleted may be anywhere). */
async function afterDocumentsChanged(name) {
  await loadIndices();
  const panel = $("index-documents");
  const ix = indexListing.indices.find((each) => each.name === name);
  if (!panel.hidden && panel.dataset.index === name && ix) await showDocuments(ix);
}

const SHOWN_TAKEN_IDS = 5; // of the ids the 409 lists (error.ids), those the page names

/** The service's 409 for documents whose ids are in the index already tells a JSON client to send them with
 * ``replace: true``; a page user ticks a box for that, which the page names instead. */
function namingTheReplaceBox(err) {
  if (err instanceof ApiError && err.code === "documents_exist") {
    const shown = (err.ids || []).slice(0, SHOWN_TAKEN_IDS).map((id) => `'${id}'`).join(", ");
    const more = (err.idsTotal || 0) - Math.min((err.ids || []).length, SHOWN_TAKEN_IDS);
    const which = shown ? `: ${shown}${more > 0 ? ` and ${more} more` : ""}` : "";
    // the focus on the box the message asks to tick (it went to the index box for pasted text)
    throw new ApiError(`HTTP ${err.status} (field: ${err.param}): documents with these ids are in the index `
      + `already${which}. Tick "Replace documents" and press Add again to replace them, or give them other ids.`,
    {...err, param: "replace"});
  }
  throw err;
}

/** A refusal naming the index as the service's routes do, by their path's ``name`` ("(field: name)", a field the
 * Indices tab's forms have not), said as the box that holds it, "Index": "(field: index)", the focus on that box. */
function namingTheIndexBox(err) {
  if (err instanceof ApiError && err.param === "name") {
    err.message = err.message.replace(/^(HTTP \d+) \(field: name\)/, "$1 (field: index)");
    err.param = "index";
  }
  throw err;
}

/** The upload form's field of each ``param`` an error names (the page's checks and the service's). */
const UPLOAD_FIELDS = {name: "upload-index", index: "upload-index", spec: "upload-spec", files: "upload-files",
  id: "upload-id", title: "upload-title", text: "upload-text", replace: "upload-replace"};

let uploading = false; // an upload's parts are being sent, one after another, by this page: leaving it stops them

async function upload(event) {
  event.preventDefault();
  const status = $("upload-status");
  status.textContent = ""; // the last upload's outcome is not this one's
  $("upload-button").disabled = true;
  uploading = true;
  try {
    const added = await guarded(async () => {
      const name = checkedName($("upload-index").value.trim(), "index", "index");
      if (readOnlyReason(name)) throw new ApiError(readOnlyReason(name), {param: "index"}); // before files are read
      const isNew = !indexListing.indices.some((ix) => ix.name === name && ix.writable);
      const options = isNew ? {spec: $("upload-spec").value} : {};
      if ($("upload-replace").checked) options.replace = true;
      const warnings = []; // how the page or the service read a file (a guessed encoding, front matter left out)
      const requests = await uploadRequests(options, warnings);
      let added = 0;
      let chunks = 0;
      const blank = []; // parts of a PDF whose pages have no text layer (scans, figures): nothing to add
      for (let n = 0; n < requests.length; n += 1) {
        const request = requests[n];
        const where = requests.length > 1 ? `part ${n + 1} of ${requests.length}: ` : "";
        status.textContent = `${where}sending…`;
        let queued;
        try {
          queued = await call("POST", `v1/indices/${encodeURIComponent(name)}/${request.route}`, request.body)
            .catch(namingTheReplaceBox).catch(namingTheIndexBox);
        } catch (err) {
          const smaller = smallerRequests(request, err); // more pages or rows than a request may add: in parts
          if (smaller === null && !(err.code === "no_text_layer" && request.part)) {
            throw added && err instanceof ApiError // how far it got, as a failed task says
              ? new ApiError(`${err.message} (${added} document(s) of earlier parts are in the index)`, err) : err;
          }
          const {part, files} = request;
          if (smaller === null) blank.push(`pages ${part.first}-${part.last} of ${files[0].name}`);
          requests.splice(n, 1, ...(smaller || []));
          n -= 1;
          continue;
        }
        warnings.push(...(queued.warnings || []));
        shownIngestions.add(queued.task_id); // followed here: not listed again as a running ingestion
        const done = await finished(queued.task_id, (progress) => {
          status.textContent = `${where}task ${queued.task_id}: ${ingestionProgress(progress, queued.documents)}`;
        });
        if (done.status !== "finished") {
          throw new ApiError(`task ${queued.task_id} ${done.status}: ${done.error || ""} (${added} document(s) `
            + "of earlier parts are in the index)");
        }
        added += done.result.aggregated_data.documents;
        chunks += done.result.aggregated_data.chunks;
      }
      uploading = false; // every part is in: leaving now loses nothing (the lists below are read again after it)
      status.textContent = `added ${added} document(s) to ${name} as ${chunks} passage(s)`
        + (blank.length ? `; no text layer (scans? no OCR is done), not added: ${blank.join(", ")}` : "")
        + (warnings.length ? `. Warnings: ${warnings.join("; ")}` : "");
      announce(status.textContent);
      // the pasted document's id and title go with its text: kept, the next text pasted was refused as that id
      for (const id of ["upload-files", "upload-text", "upload-id", "upload-title"]) $(id).value = "";
      await afterDocumentsChanged(name);
      return true;
    }, {focus: {fields: UPLOAD_FIELDS, fallback: "upload-index"}});
    if (!added) status.textContent = ""; // refused: the error says how far it got, not a stale "sending…"
  } finally {
    uploading = false;
    $("upload-button").disabled = false;
    if (focusLost()) $("upload-button").focus(); // it was off while the documents went in
  }
}

/** Whether GET /v1/indices lists index ``name``, read again when the table does not (made since, elsewhere). */
async function listedIndex(name) {
  const listed = () => indexListing.indices.some((ix) => ix.name === name);
  if (listed()) return true;
  await loadIndices();
  return listed();
}

async function deleteDocuments(event) {
  event.preventDefault();
  const ids = $("delete-docs-ids").value.split(/[\n,]/).map((id) => id.trim()).filter(Boolean);
  $("delete-docs-status").textContent = ""; // the last deletion's outcome is not this one's
  await guarded(async () => {
    const name = checkedName($("delete-docs-index").value.trim(), "index", "index");
    if (readOnlyReason(name)) throw new ApiError(readOnlyReason(name), {param: "index"}); // (the button is off)
    if (!ids.length) { // the service's words would be pydantic's ("List should have at least 1 item")
      throw new ApiError("enter the ids of the documents to delete (field: ids): one a line, or separated by commas",
        {param: "ids"});
    }
    if (!await listedIndex(name)) { // asked to confirm, then got the service's 404
      throw new ApiError(`there is no index '${name}' (field: index): the table above lists the indices`,
        {param: "index"});
    }
    if (!window.confirm(`Delete ${ids.length} document(s) from the index '${name}'?`)) return;
    const done = await call("POST", `v1/indices/${encodeURIComponent(name)}/delete`, {ids}).catch(namingTheIndexBox);
    const missing = done.missing.length ? `; not in the index: ${done.missing.join(", ")}` : "";
    // the index named, as an upload's outcome names it: the box may name another one by the time it is read
    $("delete-docs-status").textContent = `deleted ${done.deleted.length} document(s) (${done.chunks} `
      + `passage(s)) from ${name}${missing}`;
    announce($("delete-docs-status").textContent);
    await afterDocumentsChanged(name);
  }, {focus: {fields: {index: "delete-docs-index", ids: "delete-docs-ids"}, fallback: "delete-docs-ids"}});
}

/** How far an ingestion task is (its GET /task/progress body): its step, the passages embedded of those of its
 * upload once they are chunked (a large file that is one document moves by them), its documents of ``documents``
 * (the upload's; unknown after a reload: the ingest step's own total); a compaction (a third step of an upload
 * that leaves too many shards) its passages merged. */
function ingestionProgress(body, documents) {
  const step = body.progress.current_step || "queued";
  const info = body.progress.step_progress[step] || {};
  if (step === "compact") {
    return `compacting the index, ${info.rows_out || 0} of ${info.rows_in || 0} passage(s) merged`;
  }
  const total = documents ?? (info.rows_in || null);
  const docs = `${info.rows_out || 0}${total === null ? "" : ` of ${total}`} document(s)`;
  return info.passages_total ? `${step}, ${info.passages_done} of ${info.passages_total} passage(s) embedded `
    + `(${docs})` : `${step}, ${docs}`;
}

const shownIngestions = new Set(); // the ingestion tasks this page follows or has seen end: each asked about once

/** The caller's indices' ingestions running now that this page did not start (an upload under way when the page
 * was reloaded, or one sent from elsewhere), one line each under the table, followed to their end (GET
 * /task/progress) as an upload sent here is; the table is read again once each ends. Their index's latest
 * ingestion (``ingest_task``) each, asked about once: those not running (``GET /tasks?status=``) are not shown. */
async function showIngestions() {
  const latest = new Map(indexListing.indices.filter((ix) => ix.writable && ix.ingest_task
    && !shownIngestions.has(ix.ingest_task)).map((ix) => [ix.ingest_task, ix.name]));
  if (!latest.size) return;
  const pages = await Promise.all(["running", "queued"].map((state) => call("GET",
    `tasks?status=${state}&limit=1000`)));
  const running = new Set(pages.flatMap((page) => page.tasks.map((task) => task.id)));
  for (const [taskId, name] of latest) {
    if (shownIngestions.has(taskId)) continue; // (a load of the list that came meanwhile follows it)
    shownIngestions.add(taskId);
    if (running.has(taskId)) guarded(() => followIngestion(taskId, name), {clear: false});
  }
}

async function followIngestion(taskId, name) {
  const line = el("li", {"data-task": taskId});
  $("index-ingestions").append(line);
  const say = (text) => { line.textContent = `${name}: task ${taskId}: ${text}`; };
  say("…");
  const done = await finished(taskId, (body) => say(ingestionProgress(body)));
  const outcome = done.result ? done.result.result_description.text : done.error || "";
  say(`${done.status}${outcome ? `: ${outcome}` : ""}`);
  announce(line.textContent);
  await afterDocumentsChanged(name);
}
