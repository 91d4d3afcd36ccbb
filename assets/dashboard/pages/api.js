// The API reference: this server's OpenAPI 3.1 document (/api/v1/openapi.json), its operations
// grouped by tag, each with its method, path, summary, credentials, parameters and the request
// and response schemas. Everything from the document is shown as text, never as HTML.

import { useState } from "../../vendor/hooks.mjs";
import { get } from "../api.js";
import { Badge, Card, Empty, ErrorBox, Input, Loading, PageHeader, Select, html, useAsync } from "../ui.js";

const METHODS = ["get", "post", "put", "patch", "delete", "options"];
const TONE = { get: "blue", post: "green", put: "amber", patch: "amber", delete: "red", options: "gray" };

/** The value a local `$ref` points at (null when it does not resolve). */
function deref(doc, ref) {
  if (typeof ref !== "string" || !ref.startsWith("#/")) return null;
  let v = doc;
  for (const part of ref.slice(2).split("/")) {
    const key = part.replace(/~1/g, "/").replace(/~0/g, "~");
    if (v === null || typeof v !== "object" || !(key in v)) return null;
    v = v[key];
  }
  return v;
}

const refName = (ref) => String(ref).split("/").pop();

/** Prose from the document, its `code` spans as <code> (all of it as text). */
function Prose({ text }) {
  return String(text).split("`").map((part, i) => (i % 2 ? html`<code>${part}</code>` : part));
}

/** A one-line name for a schema's type. */
function typeOf(doc, s, depth = 0) {
  if (s === true || s === undefined || s === null || (typeof s === "object" && !Object.keys(s).length)) return "any";
  if (s.$ref) return refName(s.$ref);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (s.const !== undefined) return JSON.stringify(s.const);
  const alts = s.anyOf || s.oneOf;
  if (alts && depth < 3) return alts.map((x) => typeOf(doc, x, depth + 1)).join(" | ");
  if (s.allOf && s.allOf.length === 1 && depth < 3) return typeOf(doc, s.allOf[0], depth + 1);
  const t = Array.isArray(s.type) ? s.type.join(" | ") : s.type;
  if (t === "array" && s.items) return `array of ${typeOf(doc, s.items, depth + 1)}`;
  if (t === "object" && s.additionalProperties && typeof s.additionalProperties === "object" && !s.properties) {
    return `map of ${typeOf(doc, s.additionalProperties, depth + 1)}`;
  }
  return t || (s.properties ? "object" : "any");
}

/** The object schema whose properties to list, following one `$ref`, an `allOf` and arrays. */
function fieldsOf(doc, s, seen) {
  if (!s || typeof s !== "object") return null;
  if (s.$ref) {
    if (seen.includes(s.$ref)) return null;
    return fieldsOf(doc, deref(doc, s.$ref), [...seen, s.$ref]);
  }
  if (s.properties) return s;
  if (s.allOf && s.allOf.length) return fieldsOf(doc, s.allOf[0], seen);
  if (s.items) return fieldsOf(doc, s.items, seen);
  const alts = (s.anyOf || s.oneOf || []).filter((x) => x && x.type !== "null");
  if (alts.length === 1) return fieldsOf(doc, alts[0], seen);
  return null;
}

/** A schema as a nested list of its fields: name, type, required, description. */
function Schema({ doc, schema, depth = 0, seen = [] }) {
  const obj = fieldsOf(doc, schema, seen);
  if (!obj) {
    return depth ? null : html`<p class="api-type"><code>${typeOf(doc, schema)}</code>${schema && schema.description ? html` — ${schema.description}` : ""}</p>`;
  }
  const required = new Set(obj.required || []);
  const entries = Object.entries(obj.properties || {});
  return html`<ul class="api-fields">
    ${depth === 0 && html`<li class="api-type"><code>${typeOf(doc, schema)}</code></li>`}
    ${entries.map(([name, s]) => html`<li key=${name}>
      <code class="api-field">${name}</code> <span class="muted small">${typeOf(doc, s)}</span>
      ${required.has(name) ? html` <span class="api-req small">required</span>` : ""}
      ${s && s.description ? html`<span class="small"> — <${Prose} text=${s.description} /></span>` : ""}
      ${depth < 2 && html`<${Schema} doc=${doc} schema=${s} depth=${depth + 1} seen=${schema && schema.$ref ? [...seen, schema.$ref] : seen} />`}
    </li>`)}
  </ul>`;
}

/** The operation's prose, without the permission sentence the page shows beside the credentials. */
function description(op) {
  const d = op.description || "";
  return op["x-permission"] ? d.replace(/(\n\n)?Permission: `[^`]*`\.$/, "") : d;
}

/** The credentials an operation accepts, in words. */
function credentials(op) {
  const sec = op.security || [];
  if (!sec.length) return "none (public)";
  return sec.map((r) => Object.keys(r).join(" + ")).join(", or ");
}

function Parameters({ doc, params }) {
  const list = (params || []).map((p) => (p.$ref ? deref(doc, p.$ref) : p)).filter(Boolean);
  if (!list.length) return null;
  return html`<div class="table-wrap"><table class="table api-params">
    <caption class="sr-only">Parameters</caption>
    <thead><tr><th scope="col">Name</th><th scope="col">In</th><th scope="col">Type</th><th scope="col">Description</th></tr></thead>
    <tbody>${list.map((p) => html`<tr key=${p.in + p.name}>
      <td><code>${p.name}</code>${p.required ? html` <span class="api-req small">required</span>` : ""}</td>
      <td>${p.in}</td><td class="small">${typeOf(doc, p.schema)}</td><td class="small"><${Prose} text=${p.description || ""} /></td>
    </tr>`)}</tbody>
  </table></div>`;
}

function Body({ doc, content }) {
  return Object.entries(content || {}).map(([media, c]) => html`<div key=${media} class="api-media">
    <p class="small muted">${media}</p>
    ${c && c.schema ? html`<${Schema} doc=${doc} schema=${c.schema} />` : ""}
  </div>`);
}

function Operation({ doc, method, path, op }) {
  const [open, setOpen] = useState(false);
  const responses = Object.entries(op.responses || {});
  return html`<details class="api-op" data-testid="api-operation" onToggle=${(e) => setOpen(e.currentTarget.open)}>
    <summary>
      <${Badge} tone=${TONE[method]}>${method.toUpperCase()}</${Badge}>
      <code class="api-path" data-testid="api-path">${path}</code>
      <span class="api-summary"><${Prose} text=${op.summary} /></span>
    </summary>
    ${open && html`<div class="api-op-body" data-testid="api-operation-body">
      ${description(op) && html`<p class="api-desc"><${Prose} text=${description(op)} /></p>`}
      <p class="small"><strong>Credentials:</strong> ${credentials(op)}${op["x-permission"] ? html` · <strong>Permission:</strong> <code>${op["x-permission"]}</code>` : ""}</p>
      ${op["x-schema-complete"] === false && html`<p class="small muted">Some bodies here are not described by a schema yet; docs/api.md has their shape.</p>`}
      ${op.parameters && op.parameters.length ? html`<h3 class="api-h">Parameters</h3><${Parameters} doc=${doc} params=${op.parameters} />` : ""}
      ${op.requestBody && html`<h3 class="api-h">Request body${op.requestBody.required ? "" : " (optional)"}</h3><${Body} doc=${doc} content=${op.requestBody.content} />`}
      <h3 class="api-h">Responses</h3>
      <ul class="api-responses">${responses.map(([status, r0]) => {
        const r = r0.$ref ? deref(doc, r0.$ref) || {} : r0;
        const isError = status === "default" || status.startsWith("4") || status.startsWith("5");
        return html`<li key=${status} data-testid="api-response">
          <span class="api-status">${status}</span> <span class="small"><${Prose} text=${r.description || ""} /></span>
          ${!isError && html`<${Body} doc=${doc} content=${r.content} />`}
        </li>`;
      })}</ul>
    </div>`}
  </details>`;
}

export default function ApiReference() {
  const res = useAsync(() => get("/openapi.json"), []);
  const [q, setQ] = useState("");
  const [tag, setTag] = useState("");
  const doc = res.data;
  const needle = q.trim().toLowerCase();
  const groups = [];
  if (doc) {
    const byTag = new Map((doc.tags || []).map((t) => [t.name, { tag: t, ops: [] }]));
    for (const [path, item] of Object.entries(doc.paths || {})) {
      for (const m of METHODS) {
        const op = item[m];
        if (!op) continue;
        const hay = `${m} ${path} ${op.summary || ""}`.toLowerCase();
        if (needle && !hay.includes(needle)) continue;
        const name = (op.tags && op.tags[0]) || "Other";
        if (!byTag.has(name)) byTag.set(name, { tag: { name }, ops: [] });
        byTag.get(name).ops.push({ path, method: m, op });
      }
    }
    for (const g of byTag.values()) if (g.ops.length && (!tag || g.tag.name === tag)) groups.push(g);
  }
  const count = groups.reduce((n, g) => n + g.ops.length, 0);
  return html`<div class="page">
    <${PageHeader} title="API reference"
      subtitle=${html`The REST API of this server, from its OpenAPI 3.1 document: <a href="/api/v1/openapi.json" data-testid="api-json-link">/api/v1/openapi.json</a>.`} />
    <${ErrorBox} error=${res.error} retry=${res.reload} />
    ${res.loading && !doc ? html`<${Loading} />` : doc && html`
      <${Card} title="Find an operation" testid="api-filters"><div class="filters">
        <${Input} label="Path or summary" name="q" value=${q} className="field-inline" testid="api-search"
          onInput=${(e) => setQ(e.currentTarget.value)} />
        <${Select} label="Tag" name="tag" value=${tag} className="field-inline" testid="api-tag"
          options=${[["", "All"], ...(doc.tags || []).map((t) => [t.name, t.name])]} onChange=${(e) => setTag(e.currentTarget.value)} />
        <p class="small muted" data-testid="api-count">${count} operations · OpenAPI ${doc.openapi} · version ${doc.info && doc.info.version}</p>
      </div></${Card}>
      ${groups.length ? groups.map((g) => html`<${Card} key=${g.tag.name} title=${g.tag.name} testid="api-tag-group">
        ${g.tag.description && html`<p class="muted small">${g.tag.description}</p>`}
        ${g.ops.map((o) => html`<${Operation} key=${o.method + o.path} doc=${doc} ...${o} />`)}
      </${Card}>`) : html`<${Empty} title="No operation matches">Change or clear the search.</${Empty}>`}`}
  </div>`;
}
