// One document: metadata, enrichment, revision, extracted content; edit, reprocess, delete.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, post, put } from "../api.js";
import { navigate } from "../router.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, ErrorBox, FormError, Input, Json, Loading, Meta, PageHeader, TextArea,
  confirm, fmtBytes, fmtDate, fmtNum, html, toast, useAsync, useForm, usePoll,
} from "../ui.js";

export default function DocumentPage({ params, query }) {
  const manage = can("workspace.documents.manage");
  const res = useAsync(() => get("/document/" + params.id), [params.id]);
  const d = res.data;
  const [editing, setEditing] = useState(false);
  const [busy, setBusy] = useState(null);
  usePoll(() => res.reload(), 1500, !!d && (d.status === "queued" || d.status === "processing"));

  if (res.error) return html`<div class="page"><${PageHeader} title="Document" back=${["/app/documents", "Documents"]} /><${ErrorBox} error=${res.error} retry=${res.reload} /></div>`;
  if (!d) return html`<${Loading} />`;

  const reprocess = async () => {
    setBusy("reprocess");
    try { await post(`/document/${d.id}/reprocess`); toast("Reprocessing started."); res.reload(); } catch (e) { toast(e.message, "error"); } finally { setBusy(null); }
  };
  const remove = async () => {
    if (!(await confirm({ title: "Delete this document?", message: `“${d.title}” and its chunks leave the search indexes. This cannot be undone.`, confirmLabel: "Delete", danger: true }))) return;
    setBusy("delete");
    try { await del("/document/" + d.id); toast("Document deleted."); navigate("/app/documents"); } catch (e) { toast(e.message, "error"); setBusy(null); }
  };
  const e = d.enrichment;
  const highlightChunk = query.chunk;

  return html`<div class="page" data-testid="document-page">
    <${PageHeader} title=${d.title || "(untitled)"} back=${["/app/documents", "Documents"]}
      subtitle=${html`<${Badge} testid="doc-detail-status">${d.status}</${Badge}> <span class="muted">revision ${d.revision} · ${fmtNum(d.chunkCount)} chunks</span>`}
      actions=${manage && html`
        <${Button} onClick=${() => setEditing(!editing)} testid="doc-edit">${editing ? "Cancel edit" : "Edit"}</${Button}>
        <${Button} onClick=${reprocess} busy=${busy === "reprocess"} disabled=${d.status === "queued" || d.status === "processing"} testid="doc-reprocess">Reprocess</${Button}>
        <${Button} variant="danger" onClick=${remove} busy=${busy === "delete"} testid="doc-delete">Delete</${Button}>`} />
    ${d.status === "failed" && html`<div class="alert alert-error" role="alert" data-testid="doc-failure"><strong>Processing failed.</strong> ${d.failureReason || "No reason was recorded."}</div>`}
    ${highlightChunk && html`<div class="alert alert-info">Opened from a citation (chunk …${highlightChunk.slice(-8)}). The cited passage is part of the content below.</div>`}
    ${editing && html`<${EditDoc} doc=${d} onSaved=${() => { setEditing(false); res.reload(); }} />`}
    <div class="grid-2">
      <${Card} title="Details">
        <${Meta} items=${[
          ["Status", d.status], ["Revision", d.revision], ["Chunks", fmtNum(d.chunkCount)],
          ["Source", d.source ? html`<a href="/app/sources">${d.source.name}</a>` : "—"],
          ["File", d.sourceFilename], ["Format", d.detectedFormat], ["File size", fmtBytes(d.sourceSizeBytes)],
          ["Text size", fmtBytes(d.contentSizeBytes)], ["External id", d.externalDocumentId],
          ["Created", fmtDate(d.createdAt)], ["Processed", fmtDate(d.processedAt)], ["Id", html`<span class="mono small">${d.id}</span>`],
        ]} />
      </${Card}>
      <${Card} title="Enrichment">
        ${e ? html`<${Meta} items=${[
          ["Status", html`<${Badge}>${e.status}</${Badge}>`], ["Shape", e.shape], ["Model", e.provider ? `${e.provider} · ${e.model}` : null],
          ["Enriched", fmtDate(e.enrichedAt)], ["Anchor date", e.anchorDate], ["Facts", e.factCount], ["Fields", e.fieldCount],
          ["Chunks dated", e.appliedChunkCount], e.failureReason && ["Failure", e.failureReason],
          ["Generated keys", (e.generatedKeys || []).join(", ") || "—"],
        ]} />`
        : html`<p class="muted">Not enriched. Enrichment runs after processing when it is on for the workspace (<a href="/app/settings/ingestion">Ingestion settings</a>), the source, or the upload, and a chat model is configured.</p>`}
        <h3 class="mt">Metadata</h3>
        ${Object.keys(d.metadata || {}).length ? html`<${Json} value=${d.metadata} />` : html`<p class="muted">No metadata.</p>`}
      </${Card}>
    </div>
    <${Card} title="Extracted content">
      ${d.content ? html`<pre class="content-view" data-testid="doc-content">${d.content}</pre>` : html`<p class="muted">${d.status === "ready" ? "No text." : "The text appears once processing finishes."}</p>`}
    </${Card}>
  </div>`;
}

function EditDoc({ doc, onSaved }) {
  const f = useForm({ title: doc.title || "", content: doc.content || "", metadata: JSON.stringify(doc.metadata || {}, null, 2) });
  const submit = f.submit(async (v) => {
    const body = {};
    if (v.title !== doc.title) body.title = v.title;
    if (v.content !== (doc.content || "")) body.content = v.content;
    let md;
    try { md = JSON.parse(v.metadata || "{}"); } catch (e) { const err = new Error("Metadata is not valid JSON: " + e.message); err.field = "metadata"; throw err; }
    if (JSON.stringify(md) !== JSON.stringify(doc.metadata || {})) body.metadata = md;
    if (!Object.keys(body).length) { onSaved(); return; }
    await put("/document/" + doc.id, body);
    toast(body.content ? "Saved; the new revision is being processed." : "Saved.");
    onSaved();
  });
  return html`<${Card} title="Edit document">
    <form onSubmit=${submit} novalidate>
      <${FormError} error=${f.error} fields=${["title", "content", "metadata"]} />
      <${Input} form=${f} name="title" label="Title" testid="doc-edit-title" />
      <${TextArea} form=${f} name="content" label="Content" rows="10" hint="Changing the content creates a new revision." />
      <${TextArea} form=${f} name="metadata" label="Metadata (JSON)" rows="4" />
      <div class="form-actions"><${Button} type="submit" variant="primary" busy=${f.busy} testid="doc-edit-save">Save</${Button}></div>
    </form>
  </${Card}>`;
}
