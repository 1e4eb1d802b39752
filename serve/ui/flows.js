"use strict";
// The Flows tab: every flow the caller may use, one flow's spec to read, change and save, delete or search with.

let flowListing = {builtin: [], saved: [], status: {}}; // GET /flows, as the list shows it
let openedFlow = null; // the flow the editor was filled from (opened, or saved): saving it again asks nothing
let openedSpec = ""; // the spec text the editor was filled with: what differs from it is unsaved

/** The editor emptied, or filled with the saved flow ``name``'s spec ``text``: nothing in it is unsaved. */
function fillEditor(name, text) {
  $("flow-name").value = name;
  $("flow-spec").value = text;
  openedFlow = name || null;
  openedSpec = text;
}

/** Whether the spec in the editor is not the one it was filled with (a change of layout alone is none). */
function specChanged() {
  const typed = $("flow-spec").value;
  if (typed === openedSpec) return false;
  try {
    return JSON.stringify(JSON.parse(typed)) !== JSON.stringify(JSON.parse(openedSpec));
  } catch (err) {
    return true;
  }
}

/** Every flow, a saved one marked, and one the service cannot run said so (why: its title, and the status line once
 * it is opened, its `backticks` as <code> there and left out of the title: a title is out of reach of a keyboard or a
 * finger). */
async function loadFlowList(flows) {
  flows = flows || await call("GET", "flows");
  flowListing = flows;
  const off = (name) => whyNotRunnable(flows, name);
  const item = (name, saved) => el("li", {"data-flow": name},
    el("button", {type: "button", class: "link", onclick: () => guarded(() => showFlow(name))}, name),
    saved ? el("span", {class: "status"}, " saved") : null,
    off(name) ? el("span", {class: "status", title: withoutBackticks(off(name))}, " cannot run here") : null);
  $("flow-list").replaceChildren(...flows.builtin.map((n) => item(n, false)), ...flows.saved.map((n) => item(n, true)));
  offerDelete();
}

/** Whether ``name`` is a built-in flow: the service refuses to delete one (422), so the page does not ask first. */
const isBuiltinFlow = (name) => flowListing.builtin.includes(name) && !flowListing.saved.includes(name);

/** Delete off, its tooltip saying why, while the name in the editor is a built-in flow's (a flow opened, a name
 * typed, the list read again). */
function offerDelete() {
  const builtin = isBuiltinFlow($("flow-name").value.trim());
  $("flow-delete").disabled = builtin;
  $("flow-delete").title = builtin ? "a built-in flow cannot be deleted"
    : "deletes the saved flow of this name (a built-in flow cannot be deleted)";
}

async function showFlow(name) {
  // the edits of the spec in the editor would be gone with no undo (they went silently): asked first
  if (specChanged() && !window.confirm(`Discard the unsaved changes to the spec${openedFlow ? ` of '${openedFlow}'`
    : ""} and open '${name}'?`)) return;
  const spec = await call("GET", `flows/${encodeURIComponent(name)}`);
  fillEditor(name, JSON.stringify(spec, null, 2));
  offerDelete();
  const why = whyNotRunnable(flowListing, name);
  $("flow-status").replaceChildren(...withCode(why ? `cannot run here: ${why}` : ""));
  // the editor in view: a narrow window puts it under the whole list, a long list's last flows under its top
  $("flow-form").scrollIntoView({block: "nearest"});
}

/** A change of the saved flows (save, delete): the status of the one before cleared first (a refused save is not
 * "saved as" the last one), and after a refusal the focus on the field it names (a name the page or the service
 * refused, a spec), not the button. */
function changeFlows(action) {
  $("flow-status").textContent = "";
  const spec = "flow-spec"; // a step's field the service names (steps.fused.op) is in the spec: marked there
  return guarded(action, {focus: {fields: {name: "flow-name", spec, "steps.*": spec}, fallback: spec}});
}

async function afterFlowChange(message) {
  $("flow-status").textContent = message;
  announce(message);
  const flows = await call("GET", "flows");
  await loadFlowList(flows);
  await loadFlows(flows);
}

async function saveFlow(event) {
  event.preventDefault();
  await changeFlows(async () => {
    const name = checkedName($("flow-name").value.trim(), "flow");
    let spec;
    try {
      spec = JSON.parse($("flow-spec").value);
    } catch (err) {
      throw new ApiError(`the spec is not valid JSON (field: spec): ${err.message}`, {param: "spec"});
    }
    // an array or a bare value was sent and refused as the request's "body", a field the page has not
    if (spec === null || typeof spec !== "object" || Array.isArray(spec)) {
      const kind = spec === null ? "null" : Array.isArray(spec) ? "an array" : `a ${typeof spec}`;
      throw new ApiError(`the spec must be a JSON object, {"steps": {...}}, not ${kind} (field: spec)`,
        {param: "spec"});
    }
    // another saved flow of that name is replaced, with no undo: asked first, as a delete is (it went silently)
    if (flowListing.saved.includes(name) && name !== openedFlow
        && !window.confirm(`Replace the saved flow '${name}' with this spec?`)) return;
    const saved = await call("PUT", `flows/${encodeURIComponent(name)}`, spec);
    fillEditor(saved.name, JSON.stringify(saved.spec, null, 2));
    await afterFlowChange(`saved as ${saved.name}`);
  });
}

/** Deletes the saved flow named in the editor, and empties the editor: what it held is no flow any more. */
async function deleteFlow() {
  await changeFlows(async () => {
    const name = checkedName($("flow-name").value.trim(), "flow");
    if (isBuiltinFlow(name)) { // Delete is off for one; refused here all the same, before the dialog
      throw new ApiError(`'${name}' is a built-in flow and cannot be deleted (field: name)`, {param: "name"});
    }
    if (!window.confirm(`Delete the saved flow '${name}'?`)) return; // as an index or a document: no undo
    await call("DELETE", `flows/${encodeURIComponent(name)}`);
    fillEditor("", "");
    await afterFlowChange(`deleted ${name}`);
  });
}

/** The Search tab with the saved flow named in the editor chosen. It runs the saved flow, so a spec changed in the
 * editor and not saved, or another name typed over the opened flow's, is refused saying so (it ran the saved one
 * without a word): the user saves it first. */
async function useFlow() {
  await guarded(async () => {
    const name = checkedName($("flow-name").value.trim(), "flow");
    if (specChanged() || (openedFlow !== null && name !== openedFlow)) {
      throw new ApiError(`the spec in the editor has unsaved changes (field: spec): press Save first; Search with it `
        + `runs the saved flow '${name}', not the editor's text`, {param: "spec"});
    }
    const flows = await call("GET", "flows");
    await loadFlows(flows);
    const option = [...$("flow").options].find((o) => o.value === name);
    if (!option) throw new ApiError(`'${name}' is not a flow the service knows: save it first`);
    // the reason, not the option's title: the error line shows its `tessera bench` as <code>, the title has no code
    if (option.disabled) throw new ApiError(`'${name}' cannot run on this service: ${whyNotRunnable(flows, name)}`);
    $("flow").value = name;
    showTab("search");
    $("queries").focus(); // as an index's "search" does: the button pressed is on the hidden tab now
    await describeFlow();
  }, {focus: {fields: {name: "flow-name", spec: "flow-spec"}, fallback: "flow-use"}});
}
