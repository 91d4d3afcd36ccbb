// The API client: JSON in and out, the dashboard session cookie, the selected workspace, and the
// error envelope `{error: {code, message, details}}` turned into an ApiError.

const BASE = "/api/v1";
let workspaceId = null;
let onUnauthorized = null;

/** An API failure: `status`, `code`, `message`, `details` (object or null), `field` (the field it names, if any). */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message || code || `request failed (${status})`);
    this.name = "ApiError";
    this.status = status;
    this.code = code || "error";
    this.details = details || null;
    this.field = fieldOf(this.details);
  }
}

/** The field an error names: `details.field`, else `details.path` without a leading `$.`. */
function fieldOf(d) {
  if (!d) return null;
  if (typeof d.field === "string") return d.field;
  if (typeof d.path === "string") return d.path.replace(/^\$\.?/, "");
  return null;
}

/** Selects the workspace every later request runs in (`X-Workspace-Id`). */
export function setWorkspace(id) { workspaceId = id || null; }
export function currentWorkspace() { return workspaceId; }
/** Called on a 401 (the session ended); the app sends the browser to sign in. */
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

function url(path, query) {
  let u = path.startsWith("/api/") ? path : BASE + path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v === undefined || v === null || v === "") continue;
      q.set(k, String(v));
    }
    const s = q.toString();
    if (s) u += (u.includes("?") ? "&" : "?") + s;
  }
  return u;
}

function headers(extra, json) {
  const h = { Accept: "application/json", ...(extra || {}) };
  if (json) h["Content-Type"] = "application/json";
  if (workspaceId && !h["X-Workspace-Id"]) h["X-Workspace-Id"] = workspaceId;
  return h;
}

async function errorFrom(resp) {
  let body = null;
  try { body = await resp.json(); } catch { /* not JSON */ }
  const e = body && body.error;
  return new ApiError(resp.status, e && e.code, (e && e.message) || resp.statusText, e && e.details);
}

function handle401(err, opts) {
  if (err.status === 401 && !opts.noRedirect && onUnauthorized) onUnauthorized(err);
}

/**
 * One request. `opts`: method, body (JSON-encoded unless FormData/Blob), query, signal, headers,
 * noRedirect (a 401 is thrown, not turned into a sign-in redirect). Resolves to the parsed JSON
 * (null for 204).
 */
export async function api(path, opts = {}) {
  const method = opts.method || (opts.body !== undefined ? "POST" : "GET");
  const raw = opts.body instanceof FormData || opts.body instanceof Blob;
  let resp;
  try {
    resp = await fetch(url(path, opts.query), {
      method,
      credentials: "same-origin",
      headers: headers(opts.headers, opts.body !== undefined && !raw),
      body: opts.body === undefined ? undefined : raw ? opts.body : JSON.stringify(opts.body),
      signal: opts.signal,
    });
  } catch (e) {
    if (e && e.name === "AbortError") throw e;
    throw new ApiError(0, "network_error", "The server could not be reached. Check your connection and try again.", null);
  }
  if (!resp.ok) {
    const err = await errorFrom(resp);
    handle401(err, opts);
    throw err;
  }
  if (resp.status === 204) return null;
  const type = resp.headers.get("content-type") || "";
  return type.includes("json") ? resp.json() : resp.text();
}

export const get = (path, query, opts) => api(path, { ...opts, query });
export const post = (path, body, opts) => api(path, { ...opts, method: "POST", body: body === undefined ? {} : body });
export const put = (path, body, opts) => api(path, { ...opts, method: "PUT", body });
export const patch = (path, body, opts) => api(path, { ...opts, method: "PATCH", body });
export const del = (path, opts) => api(path, { ...opts, method: "DELETE" });

/**
 * A multipart upload with progress (XMLHttpRequest: fetch cannot report upload progress).
 * `onProgress(fraction)`; returns {promise, abort}.
 */
export function upload(path, formData, onProgress) {
  const xhr = new XMLHttpRequest();
  const promise = new Promise((resolve, reject) => {
    xhr.open("POST", url(path));
    xhr.withCredentials = true;
    xhr.setRequestHeader("Accept", "application/json");
    if (workspaceId) xhr.setRequestHeader("X-Workspace-Id", workspaceId);
    xhr.upload.onprogress = (e) => { if (e.lengthComputable && onProgress) onProgress(e.loaded / e.total); };
    xhr.onload = () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300) { resolve(body); return; }
      const e = body && body.error;
      const err = new ApiError(xhr.status, e && e.code, (e && e.message) || xhr.statusText || "upload failed", e && e.details);
      handle401(err, {});
      reject(err);
    };
    xhr.onerror = () => reject(new ApiError(0, "network_error", "The upload was interrupted (network error).", null));
    xhr.onabort = () => reject(new ApiError(0, "aborted", "The upload was cancelled.", null));
    xhr.send(formData);
  });
  return { promise, abort: () => xhr.abort() };
}

/**
 * POSTs `body` and reads the `text/event-stream` answer (EventSource cannot POST): calls
 * `onEvent(name, data)` for every event; resolves when the stream ends.
 */
export async function stream(path, body, onEvent, signal) {
  return readEvents(path, { method: "POST", body: JSON.stringify(body) }, onEvent, signal);
}

/**
 * GETs a long-lived event stream (EventSource cannot send the workspace header): calls
 * `onEvent(name, data)` for every event until the stream ends or `signal` aborts it.
 */
export async function listen(path, onEvent, signal) {
  return readEvents(path, { method: "GET" }, onEvent, signal);
}

async function readEvents(path, init, onEvent, signal) {
  let resp;
  try {
    resp = await fetch(url(path), {
      ...init,
      credentials: "same-origin",
      headers: { ...headers({ Accept: "text/event-stream" }, init.method === "POST") },
      signal,
    });
  } catch (e) {
    if (e && e.name === "AbortError") throw e;
    throw new ApiError(0, "network_error", "The server could not be reached.", null);
  }
  if (!resp.ok) {
    const err = await errorFrom(resp);
    handle401(err, {});
    throw err;
  }
  const type = resp.headers.get("content-type") || "";
  if (!type.includes("text/event-stream")) { onEvent("done", await resp.json()); return; }
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  const flush = (block) => {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const key = i < 0 ? line : line.slice(0, i);
      let val = i < 0 ? "" : line.slice(i + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (key === "event") name = val;
      else if (key === "data") data.push(val);
    }
    if (!data.length) return;
    let parsed = data.join("\n");
    try { parsed = JSON.parse(parsed); } catch { /* keep text */ }
    onEvent(name, parsed);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      flush(buf.slice(0, i));
      buf = buf.slice(i + 2);
    }
  }
  if (buf.trim()) flush(buf);
}

/** The message to show for any error (an ApiError's message, else a generic one). */
export function messageOf(err) {
  if (!err) return "";
  if (err instanceof ApiError) return err.message;
  return err.message || String(err);
}
