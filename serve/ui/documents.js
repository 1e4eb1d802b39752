"use strict";
// The web UI's documents to add to an index (indices.js's Indices tab): JSON and JSONL files read here into the
// API's documents, and everything one Add sends cut into requests that fit the service's limits (a PDF with more
// pages or a CSV file with more rows than one request may add, in parts). Calls api.js's
// helpers ($, ApiError) and reads indices.js's indexListing; indices.js calls uploadRequests.

/** A list's or an object's JSON text as the service writes a file's (Python's ``json.dumps``, ", " and ": "
 * between items): the metadata value `tessera ingest` and a Markdown file's front matter give the same field. */
function jsonText(value) {
  if (Array.isArray(value)) return `[${value.map(jsonText).join(", ")}]`;
  if (value && typeof value === "object") {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${jsonText(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value);
}

/** A document of the API from a record of a JSONL or JSON file: `_id` (or `id`), `title`, `text`; other fields
 * become its metadata, a list or an object as its JSON text (they were left out without a word), a null left out.
 * ``where`` names the record in an error. */
function toDocument(record, where) {
  if (!record || typeof record !== "object" || Array.isArray(record)) {
    throw new ApiError(`${where}: a document must be a JSON object`, FILES);
  }
  const {_id: underscoreId, id, title, text, metadata, ...rest} = record;
  const docId = underscoreId ?? id;
  if (docId === undefined || docId === null || docId === "") throw new ApiError(`${where}: no _id`, FILES);
  const extra = {...(metadata || {})};
  for (const [name, value] of Object.entries(rest)) {
    if (["string", "number", "boolean"].includes(typeof value)) extra[name] = value;
    else if (value !== null && typeof value === "object") extra[name] = jsonText(value);
  }
  const doc = {id: String(docId), title: title ? String(title) : "", text: text == null ? "" : String(text)};
  if (Object.keys(extra).length) doc.metadata = extra;
  documentPlaces.set(doc, where);
  return doc;
}

/** Where each document read from a file was (``dup.jsonl, line 2``), for an error about it; the pasted text's is
 * ``PASTED``. */
const documentPlaces = new WeakMap();
const PASTED = "the pasted text";

/** The page field of an error about ``doc``: the text box for the pasted text, else the files box. */
const fieldOf = (doc) => (documentPlaces.get(doc) === PASTED ? {param: "text"} : FILES);

/** A 422 for an id given twice in what one Add sends, before anything is sent, naming both places
 * (``dup.jsonl, line 2: the id 'd1' is given twice (also line 1)``): the service's own refusal named request
 * indices the user never saw (``documents.1.id``), and the focus went to the index box. */
function refuseTwiceGivenIds(documents) {
  const seen = new Map(); // id -> where it was first
  for (const doc of documents) {
    const where = documentPlaces.get(doc);
    const first = seen.get(doc.id);
    if (first !== undefined) {
      const file = (place) => place.slice(0, Math.max(place.lastIndexOf(", "), 0));
      const also = file(first) && file(first) === file(where) ? first.slice(file(first).length + 2) : first;
      throw new ApiError(`${where}: the id '${doc.id}' is given twice (also ${also})`,
        where === PASTED ? {param: "id"} : FILES);
    }
    seen.set(doc.id, where);
  }
}

/** The field of an error in a chosen file: the focus goes to the files box (it went to the index box). */
const FILES = {param: "files"};

const JSON_FILE = /\.jsonl?$/i; // parsed here into documents; PDF, text, Markdown, HTML and CSV files go as they are

/** A JSON or JSONL file's text: UTF-8, else Windows-1252 (the encoding the service takes first among those it
 * guesses for a text file that is not UTF-8), said in ``warnings``. The page reads these files itself, so the
 * service's guess never sees them, and ``file.text()`` put a replacement character for every byte that is not
 * UTF-8 without a word: "Crème" was stored as "Cr\uFFFDme". UTF-8 text with a few stray bytes stays UTF-8, each
 * such byte read as U+FFFD, as the service reads it (operators/sources/encoding.py): read as Windows-1252, its every
 * accented letter was mangled for one stray byte ("ZÃ¼rich"). */
async function fileText(file, warnings) {
  const bytes = await file.arrayBuffer();
  try {
    return new TextDecoder("utf-8", {fatal: true}).decode(bytes); // a byte-order mark dropped, as the service does
  } catch (err) {
    const text = new TextDecoder("utf-8").decode(bytes);
    const stray = (text.match(/\uFFFD/g) || []).length;
    const wide = (text.match(/[^\x00-\x7F]/g) || []).length - stray; // characters UTF-8 writes in several bytes
    if (wide > stray) {
      warnings.push(`${file.name}: UTF-8 text with ${stray} byte(s) that are not UTF-8, each read as U+FFFD (if `
        + "the file has another encoding, save it as UTF-8 and add it again)");
      return text;
    }
    warnings.push(`${file.name}: not UTF-8; read as windows-1252 (if its text looks wrong, save it as UTF-8 and `
      + "add it again)");
    return new TextDecoder("windows-1252").decode(bytes);
  }
}

/** A JSON or JSONL file's documents; a file without one (empty, blank lines, ``[]``) is refused: it was left out
 * without a word, and an Add of it alone said that no file was chosen. */
async function fileDocuments(file, warnings) {
  const documents = await readDocuments(file, warnings);
  if (!documents.length) throw new ApiError(`${file.name}: no documents`, FILES);
  return documents;
}

/** A JSONL ``line``'s parse error, without the browser's own place in it: parsed alone, the line is always its "line
 * 1" ("... in JSON at position 1 (line 1 column 2)", Firefox's "... at line 1 column 2 of the JSON data"), while the
 * file's line is said; the column is the page's own (``jsonErrorAt``): Chromium's newer messages give none
 * ("Unexpected token 'o', ..."text": oops}" is not valid JSON"), the browser's kept where the page finds none. */
function jsonLineError(err, line) {
  const place = / at (?:position (\d+)(?: \(line \d+ column (\d+)\))?|line \d+ column (\d+) of the JSON data)/
    .exec(err.message);
  const at = jsonErrorAt(line);
  const said = place ? place[2] || place[3] || String(Number(place[1]) + 1) : null;
  return {reason: place ? err.message.replace(place[0], "") : err.message, column: at === null ? said : String(at + 1)};
}

/** Where ``text`` stops being JSON (RFC 8259): the index of its first character that cannot be there (its length
 * when it ends too soon), or null when it is JSON or too deeply nested to scan. */
function jsonErrorAt(text) {
  let i = 0;
  const fail = () => { throw i; };
  const space = () => { while (" \t\n\r".includes(text[i] || "x")) i += 1; };
  const string = () => {
    i += 1; // the opening quote
    for (;;) {
      const c = text[i];
      if (c === undefined || c < " ") fail();
      if (c === '"') { i += 1; return; }
      if (c === "\\") {
        i += 1;
        if (text[i] === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) { i += 1; fail(); }
          i += 4;
        } else if (!'"\\/bfnrt'.includes(text[i] || "x")) fail();
      }
      i += 1;
    }
  };
  const list = (close, item) => {
    i += 1;
    space();
    if (text[i] === close) { i += 1; return; }
    for (;;) {
      item();
      space();
      if (text[i] === close) { i += 1; return; }
      if (text[i] !== ",") fail();
      i += 1;
    }
  };
  const value = () => {
    space();
    const c = text[i];
    if (c === "{") {
      return list("}", () => {
        space();
        if (text[i] !== '"') fail();
        string();
        space();
        if (text[i] !== ":") fail();
        i += 1;
        value();
      });
    }
    if (c === "[") return list("]", value);
    if (c === '"') return string();
    const word = ["true", "false", "null"].find((w) => text.startsWith(w, i));
    const number = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (word) i += word.length;
    else if (number) i += number[0].length;
    else if (c === "-") { i += 1; fail(); } // no number after it
    else fail();
    return undefined;
  };
  try {
    value();
    space();
    if (i < text.length) fail();
    return null;
  } catch (at) {
    return typeof at === "number" ? at : null; // (a RangeError: nested deeper than the stack)
  }
}

async function readDocuments(file, warnings) {
  const content = await fileText(file, warnings);
  if (/\.jsonl$/i.test(file.name)) {
    return content.split("\n").map((line, n) => [line, n]).filter(([line]) => line.trim()).map(([line, n]) => {
      let record;
      try {
        record = JSON.parse(line); // untrimmed (JSON allows the spaces around): a column counts from the line's start
      } catch (err) {
        const {reason, column} = jsonLineError(err, line);
        const where = `${file.name}, line ${n + 1}${column ? `, column ${column}` : ""}`;
        throw new ApiError(`${where}: not valid JSON (${reason})`, FILES);
      }
      return toDocument(record, `${file.name}, line ${n + 1}`);
    });
  }
  let records;
  try {
    records = JSON.parse(content);
  } catch (err) {
    throw new ApiError(`${file.name}: not valid JSON (${err.message})`, FILES);
  }
  // (null, a number or a string has no documents: "Cannot read properties of null" was shown of null)
  records = Array.isArray(records) ? records : (records && typeof records === "object" ? records.documents : null);
  if (!Array.isArray(records)) throw new ApiError(`${file.name}: a list of documents, or {"documents": [...]}`, FILES);
  return records.map((record, n) => toDocument(record, `${file.name}, document ${n + 1}`));
}

/** What one Add sends: documents (from JSON and JSONL files and the pasted text) in batches that fit
 * max_documents_per_request and max_body_bytes, then the other files in groups that fit max_upload_bytes;
 * ``options`` (spec, replace) go with each. ``warnings``: how the page read a file. */
async function uploadRequests(options, warnings) {
  const chosen = [...$("upload-files").files];
  for (const file of chosen) refuseUnreadable(file);
  const documents = [];
  for (const file of chosen.filter((f) => JSON_FILE.test(f.name))) {
    documents.push(...await fileDocuments(file, warnings));
  }
  const text = $("upload-text").value;
  if (text.trim()) {
    const id = $("upload-id").value.trim();
    if (!id) throw new ApiError("the pasted text needs an id (field: id)", {param: "id"});
    const pasted = {id, title: $("upload-title").value.trim(), text};
    documentPlaces.set(pasted, PASTED);
    documents.push(pasted);
  }
  refuseTwiceGivenIds(documents);
  const requests = batches(documents, options).map((batch) => ({route: "documents",
    body: {documents: batch, ...options}}));
  for (const group of fileGroups(chosen.filter((f) => !JSON_FILE.test(f.name)))) {
    requests.push(filesRequest(group, options));
  }
  if (!requests.length) throw new ApiError("choose files or paste a text to add", {param: "files"});
  return requests;
}

/** A request of ``files`` (a multipart form), with ``options``; ``part``: a part of a lone PDF or CSV file, its
 * form field (first_page, first_row), its ``unit`` (pages, rows) and its first and last. */
function filesRequest(files, options, part) {
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  for (const [name, value] of Object.entries(options)) form.append(name, String(value));
  if (part) form.append(part.field, String(part.first));
  return {route: "files", body: form, files, options, part};
}

/** The refusals of a lone file of more documents than one request may add, which say how many it holds: the
 * error's field that counts them, and the form field of a part. */
const PARTS = {too_many_pages: {unit: "pages", field: "first_page"}, too_many_rows: {unit: "rows", field: "first_row"}};

/** A files request refused for holding more documents than one request may add (a PDF's pages and a CSV file's rows
 * are counted only by the service), as smaller requests: a group of files a file each, a lone PDF or CSV file (its
 * 422 ``too_many_pages`` or ``too_many_rows`` says how many it has) in parts of max_documents_per_request pages or
 * rows; null for any other refusal. */
function smallerRequests(request, err) {
  if (request.route !== "files" || !(err instanceof ApiError) || request.part
      || !(err.code in PARTS || err.code === "max_documents_per_request")) return null;
  if (request.files.length > 1) return request.files.map((file) => filesRequest([file], request.options));
  const {unit, field} = PARTS[err.code] || {};
  if (!unit || !err[unit]) return null;
  const most = indexListing.limits.max_documents_per_request;
  const parts = [];
  for (let first = 1; first <= err[unit]; first += most) {
    parts.push(filesRequest(request.files, request.options,
      {field, unit, first, last: Math.min(first + most - 1, err[unit])}));
  }
  return parts;
}

/** A file the service reads no document from (the kinds the file field accepts), refused before anything is sent:
 * sent, it was refused only after the parts before it had been added. */
function refuseUnreadable(file) {
  const kinds = $("upload-files").accept.split(",");
  if (!kinds.some((suffix) => file.name.toLowerCase().endsWith(suffix))) {
    throw new ApiError(`${file.name}: not a PDF, text, Markdown, HTML, CSV, JSONL or JSON file (${kinds.join(", ")}) `
      + "(field: files)", FILES);
  }
}

/** Bytes a multipart form spends around each file (its boundary line and headers, with the file's name), and
 * around all of them (the options' parts, the closing boundary); more than a browser writes. */
const FORM_BYTES_PER_FILE = 512;
const FORM_BYTES = 1024;
const formBytes = (file) => FORM_BYTES_PER_FILE + 3 * new TextEncoder().encode(file.name).length;

/** The files in groups whose form fits max_upload_bytes and holds at most max_documents_per_request files (each file
 * gives one document or more: more files in one request are refused). */
function fileGroups(files) {
  const {max_upload_bytes: most, max_documents_per_request: count} = indexListing.limits;
  const groups = [];
  let group = [];
  let size = FORM_BYTES;
  for (const file of files) {
    const fileSize = file.size + formBytes(file);
    if (FORM_BYTES + fileSize > most) {
      throw new ApiError(`${file.name}: ${file.size} bytes, ${file.size > most ? "over" : "with the form around it "
        + "over"} the service's max_upload_bytes (${most}) (field: files)`, FILES);
    }
    if (group.length && (group.length >= count || size + fileSize > most)) {
      groups.push(group);
      group = [];
      size = FORM_BYTES;
    }
    group.push(file);
    size += fileSize;
  }
  if (group.length) groups.push(group);
  return groups;
}

/** The documents in batches that one request may carry: at most max_documents_per_request, and a body (the JSON
 * ``call`` sends: ``{documents, ...options}``) of at most max_body_bytes. A document that no request can carry is
 * refused before anything is sent. */
function batches(documents, options) {
  const {max_documents_per_request: most, max_body_bytes: bytes} = indexListing.limits;
  const encoder = new TextEncoder();
  const jsonBytes = (value) => encoder.encode(JSON.stringify(value)).length;
  const empty = jsonBytes({documents: [], ...options});
  const result = [];
  let batch = [];
  let size = empty;
  for (const doc of documents) {
    const docSize = jsonBytes(doc);
    if (empty + docSize > bytes) {
      const field = fieldOf(doc); // the text box for the pasted text (the focus went to the index box)
      throw new ApiError(`document '${doc.id}': ${docSize} bytes as JSON, over what one request may carry, the `
        + `service's max_body_bytes (${bytes}) (field: ${field.param})`, field);
    }
    if (batch.length && (batch.length >= most || size + 1 + docSize > bytes)) { // 1: the comma before it
      result.push(batch);
      batch = [];
      size = empty;
    }
    size += (batch.length ? 1 : 0) + docSize;
    batch.push(doc);
  }
  if (batch.length) result.push(batch);
  return result;
}
