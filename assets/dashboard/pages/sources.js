// Sources: where documents come from (uploads, the API, later crawls and connectors), with their
// document counts, reprocessing, the enrichment override and deletion.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, patch, post } from "../api.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Empty, ErrorBox, Loading, PageHeader, Pager, Select, Table, confirm, fmtDate, fmtNum, html, toast, usePager,
} from "../ui.js";
import { StatusCell } from "./documents.js";

export default function Sources() {
  const manage = can("workspace.documents.manage");
  const pager = usePager((cursor) => get("/document/sources", { cursor, limit: 50 }), "sources", []);
  const [open, setOpen] = useState(null);
  const [busy, setBusy] = useState(null);

  const reprocess = async (s) => {
    setBusy(s.id);
    try {
      const r = await post(`/document/sources/${s.id}/reprocess`);
      toast(r.status === "noop" ? "Nothing to reprocess." : `Queued ${r.queuedDocumentCount} documents; ${r.skippedDocumentCount} skipped (already queued or processing).`);
    } catch (e) { toast(e.message, "error"); } finally { setBusy(null); }
  };
  const setOverride = async (s, v) => {
    try { await patch(`/document/sources/${s.id}`, { documentEnrichmentOverride: v }); toast("Enrichment setting saved."); pager.reload(); } catch (e) { toast(e.message, "error"); }
  };
  const remove = async (s) => {
    if (!(await confirm({ title: "Delete this source?", message: `“${s.name}” and its ${s.documentCount} documents are removed from the indexes. This cannot be undone.`, confirmLabel: "Delete source", danger: true }))) return;
    try { await del(`/document/sources/${s.id}`); toast("Source deleted."); pager.reload(); } catch (e) { toast(e.message, "error"); }
  };

  return html`<div class="page">
    <${PageHeader} title="Sources" subtitle="Every document belongs to a source: uploaded files, documents sent through the API, and later crawls and connectors." />
    <${Card}>
      <${ErrorBox} error=${pager.error} retry=${pager.reload} />
      ${pager.loading && !pager.data ? html`<${Loading} />` : html`<${Table} caption="Sources" rowTestId="source-row" rows=${pager.items}
        columns=${[
          { label: "Name", render: (s) => html`<button type="button" class="link" onClick=${() => setOpen(open === s.id ? null : s.id)} aria-expanded=${open === s.id}>${s.name}</button>` },
          { label: "Type", render: (s) => html`<${Badge} tone="gray">${s.kind || s.type}</${Badge}>` },
          { label: "Documents", render: (s) => fmtNum(s.documentCount), className: "num" },
          { label: "Enrichment", render: (s) => manage
            ? html`<${Select} label=${"Enrichment for " + s.name} name="override" value=${s.documentEnrichmentOverride || "inherit"} className="field-inline sr-label"
                options=${[["inherit", "Workspace default"], ["on", "On"], ["off", "Off"]]} onChange=${(e) => setOverride(s, e.currentTarget.value)} />`
            : s.documentEnrichmentOverride },
          { label: "Created", render: (s) => fmtDate(s.createdAt), className: "nowrap" },
          manage && { label: "Actions", render: (s) => html`<div class="row">
            <${Button} small onClick=${() => reprocess(s)} busy=${busy === s.id} testid="source-reprocess">Reprocess</${Button}>
            <${Button} small variant="danger" onClick=${() => remove(s)} testid="source-delete">Delete</${Button}></div>` },
        ].filter(Boolean)}
        empty=${html`<${Empty} title="No sources yet">A source appears when you upload a file or send a document through the API. <a href="/app/documents">Upload documents</a>.</${Empty}>`} />`}
      <${Pager} pager=${pager} label="sources" />
    </${Card}>
    ${open && html`<${SourceDocs} id=${open} name=${(pager.items.find((s) => s.id === open) || {}).name} />`}
  </div>`;
}

function SourceDocs({ id, name }) {
  const pager = usePager((cursor) => get(`/document/sources/${id}/documents`, { cursor, limit: 25 }), "documents", [id]);
  return html`<${Card} title=${"Documents of " + (name || "source")}>
    <${ErrorBox} error=${pager.error} />
    <${Table} caption="Documents of the source" rows=${pager.items} columns=${[
      { label: "Title", render: (d) => html`<a href=${"/app/documents/" + d.id}>${d.title}</a>` },
      { label: "Status", render: (d) => html`<${StatusCell} doc=${d} />` },
      { label: "Updated", render: (d) => fmtDate(d.updatedAt) },
    ]} empty=${html`<${Empty} title="No documents in this source" />`} />
    <${Pager} pager=${pager} label="documents" />
  </${Card}>`;
}
