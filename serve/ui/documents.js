"use strict";
// The web UI's documents to add to an index (indices.js's Indices tab): JSON and JSONL files read here into the
// API's documents, and everything one Add sends cut into requests that fit the service's limits. Calls api.js's
// helpers ($, ApiError) and reads indices.js's indexListing; indices.js calls uploadRequests.

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
