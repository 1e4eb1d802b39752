"use strict";
// What a flow wrote for a query, as the Search tab and a task's view both show it: the answer with its sources,
// the summary, the hits in a table, the metadata folded. Built with api.js's el, text as text.

const PREVIEW_CHARS = 280; // a hit's text longer than this is cut in its table, with a "more" button
const HEADING_CHARS = 160; // a query longer than this is cut in its heading (whole in the title)

/** ``text`` cut to at most ``chars`` UTF-16 units at a whole character as the reader sees one (Intl.Segmenter's
 * graphemes): ``slice`` cut an emoji's surrogate pair in two, shown as �, and a flag into one boxed letter. */
function cutText(text, chars) {
  if (text.length <= chars) return text;
  let end = 0;
  for (const {segment, index} of new Intl.Segmenter(undefined, {granularity: "grapheme"}).segment(text)) {
    if (index + segment.length > chars) break;
    end = index + segment.length;
  }
  return text.slice(0, end);
}

/** A query as a heading: a long one cut with an ellipsis, the whole query in its title; its direction its own
 * (``dir: auto``), so an Arabic or Hebrew query reads right to left. */
function queryHeading(query, tag = "h2") {
  const text = String(query ?? "");
  const shown = text.length > HEADING_CHARS ? `${cutText(text, HEADING_CHARS - 1)}…` : text;
  return el(tag, {title: text, dir: "auto"}, shown);
}

const SEARCHED_CHARS = 200; // a follow-up's search longer than this is cut in its turn, with a "more" button

/** What a chat's follow-up was searched for (``label``: "searched for", "asked as"): the question and the earlier
 * turns (query.contextualize), cut at SEARCHED_CHARS with "more", the whole text in its title; shown whole, it held
 * the whole previous answer under every follow-up. */
function searchedLine(label, text) {
  return el("div", {class: "searched", title: text}, `${label}: `,
    el("bdi", {}, passageText(String(text), SEARCHED_CHARS)));
}

/** A text with `backticks` (a flow's description) as text nodes and <code> elements: built, never parsed as HTML. */
function withCode(text) {
  return text.split(/`([^`]+)`/).map((part, n) => (n % 2 ? el("code", {}, part) : part));
}

/** A text with `backticks` for a tooltip (a title holds no <code>): the backticks left out, as withCode leaves them. */
const withoutBackticks = (text) => String(text).replace(/`([^`]+)`/g, "$1");

/** A table whose cells name their column (``data-column``), so a narrow window can lay its rows out as cards; each
 * cell takes the direction of its text (an Arabic title right to left, with its punctuation at its end). */
function table(columns, rows, cell) {
  return el("table", {},
    el("thead", {}, el("tr", {}, ...columns.map((c) => el("th", {}, c)))),
    el("tbody", {}, ...rows.map((row) => el("tr", {},
      ...columns.map((c) => el("td", {"data-column": c, dir: "auto"}, cell(row, c)))))));
}

const fieldText = (value) => (typeof value === "object" ? JSON.stringify(value) : String(value));

function hitCell(hit, column, columns) {
  const value = hit[column];
  if (value === null || value === undefined) return "";
  if (column === "score") return Number(value).toFixed(4);
  if (column === "text") return passageText(String(value));
  if (column === "docno") return openingDocno(hit, String(value), columns);
  return fieldText(value);
}

/** A hit's docno as a button that opens, in a row under its own, every other field the flow wrote for it (a PDF's
 * path and page, each retriever's score and rank, the demo flow's language and word counts): the table's columns
 * alone showed nothing of them. */
function openingDocno(hit, docno, columns) {
  const button = el("button", {type: "button", class: "link", "aria-expanded": "false",
    title: "every field of this hit"}, docno);
  button.onclick = () => {
    const row = button.closest("tr");
    const open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    if (!open) {
      const opened = row.nextElementSibling;
      if (opened && opened.classList.contains("fields")) opened.remove();
      return;
    }
    const fields = Object.entries(hit).filter(([name, value]) => !columns.includes(name) && name !== "query"
      && name !== "qid" && value !== null && value !== undefined);
    const list = fields.length ? el("dl", {}, ...fields.flatMap(([name, value]) => [el("dt", {}, name),
      el("dd", {dir: "auto"}, fieldText(value))])) : el("span", {class: "status"}, "no other fields");
    row.after(el("tr", {class: "fields", "data-docno": docno}, el("td", {colSpan: columns.length}, list)));
  };
  return button;
}

/** A passage cut at ``chars`` (PREVIEW_CHARS) with a "more" button that shows it whole (and "less" that cuts it
 * again): a source is read in the page, not only in a tooltip a keyboard or a phone cannot open. */
function passageText(text, chars = PREVIEW_CHARS) {
  if (text.length <= chars) return text;
  const shown = el("span", {}, `${cutText(text, chars)}…`);
  const toggle = el("button", {type: "button", class: "link more", "aria-expanded": "false"}, "more");
  toggle.onclick = () => {
    const whole = toggle.getAttribute("aria-expanded") !== "true";
    shown.textContent = whole ? text : `${cutText(text, chars)}…`;
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
  const result = table(columns, hits, (hit, column) => hitCell(hit, column, columns));
  result.className = "hits";
  return el("div", {class: "scroll"}, result);
}

/** Each source docno as its row's title and docno, where ``rows`` has the row. */
function sourceNames(sources, rows) {
  const titles = new Map(rows.map((row) => [row.docno, row.title]));
  return sources.map((docno) => (titles.get(docno) ? `${titles.get(docno)} (${docno})` : docno));
}

/** An answer and its sources: ``items`` each source's text, numbered by the list, or (``numbered``) with the
 * numbers the answer cites them by already in the text; ``cut``: the model stopped at its max_tokens within the
 * answer (the step's ``answer_cut``), so it may end mid-sentence; ``abstained``: no document was close enough to
 * the question (the step's ``min_relevance``), so the answer is the step's no-answer text and no model wrote it;
 * ``unanswered``: no answer could be written, or it was written from no documents, and no sources (nor "no sources
 * cited") are shown under it. */
function answerView(answer, items, {degraded = null, numbered = false, cut = false, abstained = false,
  unanswered = false} = {}) {
  // <bdi>: each text in its own direction, beside the page's English labels
  const list = el(numbered ? "ul" : "ol", {class: "sources"},
    ...items.map((item) => el("li", {}, el("bdi", {}, item))));
  return el("div", {class: "answer"},
    el("p", {}, el("strong", {}, "Answer: "), answer ? el("bdi", {}, answer) : "(no answer)"),
    cut ? el("p", {class: "status cut"}, "(cut off at the step's max_tokens)") : null,
    abstained ? el("p", {class: "status abstained"}, "(no model call: no document found is as close to the " +
      "question as the answer step's min_relevance asks)") : null,
    unanswered ? null : items.length ? list : el("p", {class: "status"}, "no sources cited"),
    degraded ? el("p", {class: "status"}, `degraded: ${JSON.stringify(degraded)}`) : null);
}

/** Whether a query's answer was written from no documents at all (a flow that never searches, answer_only): no
 * rows, an answer, and not one the step declined (a search that found nothing, which "no hits" then says). Under
 * it, "no sources cited" and "no hits" were noise. */
function answeredWithoutDocuments(metadata, hits) {
  return !hits.length && typeof metadata.answer === "string" && metadata.abstained !== true;
}

/** A query's answer: its sources as the flow's references when it has them ("[4] Title (PDF, file.pdf, p. 2)",
 * numbered as the answer cites them), else by title and docno; none, nor "no sources cited", for an answer
 * written from no documents. */
function answerBlock(metadata, hits) {
  if (typeof metadata.answer !== "string") return null;
  const references = Array.isArray(metadata.references) ? metadata.references.map(String) : [];
  const options = {degraded: metadata.degraded, cut: metadata.answer_cut === true,
    abstained: metadata.abstained === true, unanswered: answeredWithoutDocuments(metadata, hits)};
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
    el("p", {}, el("strong", {}, key === "summary" ? "Summary: " : `Summary (${key}): `),
      el("bdi", {}, metadata[key])));
  return shown.length ? el("div", {class: "answer summary"}, ...shown) : null;
}

/** Everything a flow wrote for one query, as the Search tab and a task's view both show it: the answer with its
 * sources, the summary, the hits (the first ``most``), the whole metadata folded. */
function queryBlocks(metadata, hits, spec, most = Infinity) {
  // a step that degraded with no answer to show it beside (a summary that failed): said, not only folded below
  const degraded = metadata.degraded && typeof metadata.answer !== "string"
    ? el("p", {class: "status bad degraded"}, `degraded: ${describeDegraded(metadata.degraded)}`) : null;
  return [answerBlock(metadata, hits), summaryBlock(metadata, spec), degraded,
    hits.length ? hitTable(hits.slice(0, most))
      : answeredWithoutDocuments(metadata, hits) ? null : el("p", {class: "status"}, "no hits"),
    hits.length > most ? el("p", {class: "status"}, `first ${most} of ${hits.length} rows`) : null,
    Object.keys(metadata).length
      ? el("details", {}, el("summary", {}, "metadata"), el("pre", {}, JSON.stringify(metadata, null, 2)))
      : null];
}

/** A ``degraded`` mark ({step, reason}) as a line: "step summary: the reply repeats itself ...". */
function describeDegraded(mark) {
  return isRecord(mark) && mark.reason ? `step ${mark.step}: ${mark.reason}` : JSON.stringify(mark);
}
