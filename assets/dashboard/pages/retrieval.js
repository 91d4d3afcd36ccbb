// Retrieval defaults: the system defaults every agent inherits, and the metadata fields searches
// can filter by. Read-only: agents override them in their settings.

import { get } from "../api.js";
import { Badge, Card, ErrorBox, Loading, Meta, PageHeader, Table, html, useAsync } from "../ui.js";

export default function RetrievalDefaults() {
  const res = useAsync(() => get("/settings/retrieval-defaults"), []);
  const d = res.data;
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!d) return html`<${Loading} />`;
  const show = (v) => (typeof v === "boolean" ? (v ? "on" : "off") : v === "" ? "(default)" : Array.isArray(v) ? (v.length ? JSON.stringify(v) : "none") : String(v));
  const keys = Object.keys(d).filter((k) => k !== "metadataFieldSuggestions");
  return html`<div class="page">
    <${PageHeader} title="Retrieval defaults" subtitle="What every agent uses unless its own retrieval settings or a retrieve skill override it (Agents → Settings → Retrieval settings)." />
    <${Card} title="System defaults" testid="retrieval-defaults"><${Meta} items=${keys.map((k) => [k, show(d[k])])} /></${Card}>
    <${Card} title="Metadata fields you can filter by">
      <${Table} caption="Metadata fields" rowKey=${(x) => x.key} rows=${d.metadataFieldSuggestions || []} columns=${[
        { label: "Key", render: (x) => html`<code>${x.key}</code>` },
        { label: "Type", render: (x) => x.valueType },
        { label: "From", render: (x) => html`<${Badge} tone="gray">${x.source}</${Badge}>` },
      ]} empty=${html`<p class="muted">No metadata fields yet: add metadata to documents or enable enrichment.</p>`} />
    </${Card}>
  </div>`;
}
