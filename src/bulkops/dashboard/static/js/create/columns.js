// Reading a file's columns in the browser (CSV header line, or the keys of the first JSON /
// JSON Lines object, a gzip file's through DecompressionStream) and matching them to the
// operation's file columns the way the server does: exact name, else case-insensitive.
// Suggestions also ignore spaces, '_', '-' and '.'. An Excel workbook is not read here (a
// zip of XML, too much to unpack in the page): the server checks its columns on Validate.

const FIRST_READ = 64 * 1024;
const MOST_READ = 1024 * 1024;
const DELIMITERS = [",", ";", "\t", "|"];

/** Whether the file is gzip-compressed: its name ends in ".gz" (as the server decides). */
export function isGzip(file) {
  return file.name.toLowerCase().endsWith(".gz");
}

/**
 * "csv", "json", "jsonl", "xlsx" or null, from the file name's extension (a compressed
 * file's name without ".gz"), else its content type.
 */
export function fileKind(file) {
  const name = file.name.toLowerCase().replace(/\.gz$/, "");
  if (name.endsWith(".csv")) return "csv";
  if (name.endsWith(".json")) return "json";
  if (name.endsWith(".jsonl") || name.endsWith(".ndjson")) return "jsonl";
  if (name.endsWith(".xlsx")) return "xlsx";
  if (isGzip(file)) return null; // the format inside comes from the name alone
  const type = (file.type || "").toLowerCase();
  if (type.includes("spreadsheetml")) return "xlsx";
  if (type.includes("csv")) return "csv";
  if (type.includes("ndjson") || type.includes("jsonl") || type.includes("json-seq")) return "jsonl";
  if (type.includes("json")) return "json";
  return null;
}

function detectDelimiter(line) {
  let best = ",";
  let most = 0;
  for (const delimiter of DELIMITERS) {
    let quoted = false;
    let seen = 0;
    for (const c of line) {
      if (c === '"') quoted = !quoted;
      else if (!quoted && c === delimiter) seen += 1;
    }
    if (seen > most) [best, most] = [delimiter, seen];
  }
  return best;
}

/** The cells of the first CSV record of `text` (quotes and doubled quotes honoured). */
export function csvHeader(text) {
  const body = text.replace(/^\uFEFF/, "");
  const delimiter = detectDelimiter(body.split(/\r?\n/, 1)[0]);
  const cells = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < body.length; i += 1) {
    const c = body[i];
    if (quoted) {
      if (c !== '"') cell += c;
      else if (body[i + 1] === '"') {
        cell += '"';
        i += 1;
      } else quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === delimiter) {
      cells.push(cell);
      cell = "";
    } else if (c === "\n" || c === "\r") break;
    else cell += c;
  }
  cells.push(cell);
  return cells.filter((name, index) => name !== "" || index < cells.length - 1);
}

/** The keys of the first complete JSON object in `text`, or null when none is complete. */
export function firstObjectKeys(text) {
  const start = text.indexOf("{");
  if (start < 0) return null;
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let i = start; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth += 1;
    else if (c === "}") {
      depth -= 1;
      if (depth === 0) return Object.keys(JSON.parse(text.slice(start, i + 1)));
    }
  }
  return null;
}

/**
 * The first `most` bytes of a gzip file's content (fewer when it is shorter), as a Blob,
 * and whether that is all of it. Null when the browser cannot decompress.
 */
async function gunzippedStart(file, most) {
  if (typeof DecompressionStream === "undefined") return null;
  const reader = file.stream().pipeThrough(new DecompressionStream("gzip")).getReader();
  const parts = [];
  let size = 0;
  let whole = false;
  try {
    while (size < most) {
      const { done, value } = await reader.read();
      if (done) {
        whole = true;
        break;
      }
      parts.push(value);
      size += value.length;
    }
  } catch {
    throw new Error("The file is not a valid gzip file.");
  } finally {
    if (!whole) reader.cancel().catch(() => {}); // stop decompressing the rest
  }
  return { blob: new Blob(parts), whole };
}

/**
 * The file's column names, or null when the page does not read them (an Excel workbook, or
 * a gzip file in a browser without DecompressionStream): the server checks them on
 * Validate. Throws an Error with a message a user can act on.
 */
export async function readHeader(file) {
  const kind = fileKind(file);
  if (!kind) throw new Error("Choose a .csv, .json, .jsonl, .ndjson or .xlsx file (or one of them compressed, ending in .gz).");
  if (kind === "xlsx") return null;
  let source = file;
  let total = file.size;
  if (isGzip(file)) {
    const start = await gunzippedStart(file, MOST_READ);
    if (!start) return null;
    source = start.blob;
    total = start.whole ? start.blob.size : Infinity;
  }
  for (const size of [FIRST_READ, MOST_READ]) {
    const text = await source.slice(0, size).text();
    let columns = null;
    try {
      if (kind === "csv") {
        const complete = /[\r\n]/.test(text) || size >= total;
        columns = complete ? csvHeader(text) : null;
      } else {
        columns = firstObjectKeys(kind === "jsonl" ? text.replace(/^\uFEFF/, "") : text);
      }
    } catch {
      throw new Error("The file's first record is not valid JSON.");
    }
    if (columns) return columns;
    if (size >= total) break;
  }
  throw new Error(
    kind === "csv" ? "The file has no header line." : "The file holds no complete JSON object in its first megabyte.",
  );
}

const squash = (name) => name.toLowerCase().replace(/[\s_.-]+/g, "");

/** For each expected column, the file column the server would match it with (or none). */
function serverMatches(header, columns) {
  const found = new Map();
  for (const column of columns) {
    const exact = header.find((name) => name === column.name);
    const loose = header.find((name) => name.toLowerCase() === column.name.toLowerCase());
    if (exact ?? loose) found.set(column.name, exact ?? loose);
  }
  return found;
}

/**
 * Whether the header needs mapping: a required column is missing, or an expected column is
 * missing while some file column is left over (it may be that column under another name).
 */
export function needsMapping(header, columns) {
  const found = serverMatches(header, columns);
  const missing = columns.filter((column) => !found.has(column.name));
  const used = new Set(found.values());
  const spare = header.filter((name) => !used.has(name));
  return missing.some((column) => column.required) || (missing.length > 0 && spare.length > 0);
}

/** A suggested mapping: file column -> expected column name ("" when none fits). */
export function suggestMapping(header, columns) {
  const found = serverMatches(header, columns);
  const mapping = Object.fromEntries(header.map((name) => [name, ""]));
  for (const [column, fileColumn] of found) mapping[fileColumn] = column;
  const taken = new Set(found.keys());
  for (const name of header) {
    if (mapping[name]) continue;
    const column = columns.find((c) => !taken.has(c.name) && squash(c.name) === squash(name));
    if (column) {
      mapping[name] = column.name;
      taken.add(column.name);
    }
  }
  return mapping;
}

/** Expected columns no file column maps to, and columns more than one file column maps to. */
export function mappingProblems(mapping, columns) {
  const targets = Object.values(mapping).filter(Boolean);
  const twice = [...new Set(targets.filter((name, i) => targets.indexOf(name) !== i))];
  const missing = columns.filter((c) => c.required && !targets.includes(c.name)).map((c) => c.name);
  return { missing, twice };
}

/** The `columnMap` form value: only the file columns that get a different name. */
export function columnMap(mapping) {
  return Object.fromEntries(Object.entries(mapping).filter(([from, to]) => to && to !== from));
}
