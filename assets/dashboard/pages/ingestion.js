// Ingestion settings: chunking strategy and sizes, enrichment, and reprocessing every document
// with the current settings (progress polled live).

import { useState } from "../../vendor/hooks.mjs";
import { get, post, put } from "../api.js";
import { can } from "../session.js";
import { Button, Card, Checkbox, ErrorBox, FormError, Input, Loading, PageHeader, Select, confirm, html, toast, useAsync, useForm, usePoll } from "../ui.js";
import { IngestionProgress } from "./documents.js";

export default function Ingestion() {
  const res = useAsync(() => get("/settings/ingestion"), []);
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!res.data) return html`<${Loading} />`;
  return html`<${Form} initial=${res.data} onSaved=${res.reload} />`;
}

function Form({ initial, onSaved }) {
  const manage = can("workspace.settings.manage");
  const f = useForm({ ...initial });
  const [progress, setProgress] = useState(null);
  const [watch, setWatch] = useState(false);
  const v = f.values;
  usePoll(async () => { const p = await get("/document/progress"); setProgress(p); if (p.idle) setWatch(false); }, 1000, watch);

  const save = f.submit(async (x) => {
    const body = { chunkingStrategy: x.chunkingStrategy, documentEnrichmentEnabled: !!x.documentEnrichmentEnabled };
    for (const k of ["fixedWindowChunkSize", "fixedWindowChunkOverlap", "structuredMinChunkSize", "structuredMaxChunkSize"]) body[k] = Number(x[k]);
    await put("/settings/ingestion", body);
    toast("Ingestion settings saved. New and reprocessed documents use them.");
    onSaved();
  });
  const reprocess = async () => {
    if (!(await confirm({ title: "Reprocess every document?", message: "Every ready or failed document is queued again with the current settings. Search keeps working meanwhile.", confirmLabel: "Reprocess all" }))) return;
    try {
      const r = await post("/settings/ingestion/reprocess");
      toast(r.status === "noop" ? "Nothing to reprocess." : `Queued ${r.queuedDocumentCount} documents (${r.skippedDocumentCount} skipped).`);
      setWatch(true);
    } catch (e) { toast(e.message, "error"); }
  };
  return html`<div class="page">
    <${PageHeader} title="Ingestion" subtitle="How documents are split into chunks for search. Changes apply to new uploads and to reprocessed documents." />
    <form onSubmit=${save} novalidate>
      <fieldset disabled=${!manage} class="plain"><${Card} title="Chunking">
        <${FormError} error=${f.error} fields=${["chunkingStrategy", "fixedWindowChunkSize", "fixedWindowChunkOverlap", "structuredMinChunkSize", "structuredMaxChunkSize", "documentEnrichmentEnabled"]} />
        <${Select} form=${f} name="chunkingStrategy" label="Strategy" testid="ingestion-strategy" options=${[
          ["fixed_window", "Fixed window (characters)"], ["structured_semantic", "Structured (headings, paragraphs, sentences)"], ["recursive_text", "Recursive text (paragraphs → sentences → words)"]]} />
        ${v.chunkingStrategy === "fixed_window" ? html`<div class="form-grid">
          <${Input} form=${f} name="fixedWindowChunkSize" label="Chunk size (characters)" type="number" min="100" max="4000" hint="100–4000; default 1200 (a chunk and its title fit the English model's 256 tokens)." testid="ingestion-size" />
          <${Input} form=${f} name="fixedWindowChunkOverlap" label="Overlap (characters)" type="number" min="0" max="2000" hint="0–2000, less than the size; default 150." />
        </div>` : html`<div class="form-grid">
          <${Input} form=${f} name="structuredMinChunkSize" label="Minimum chunk (model tokens)" type="number" min="1" max="1000" hint="1–1000; default 24." />
          <${Input} form=${f} name="structuredMaxChunkSize" label="Maximum chunk (model tokens)" type="number" min="1" max="2000" hint="1–2000, at least the minimum; default 220." />
        </div>`}
        <${Checkbox} form=${f} name="documentEnrichmentEnabled" label="Enrich documents with a chat model" hint="Detects the document type, dates and fields after processing. Needs a chat model (Models & providers)." />
        ${manage && html`<div class="form-actions"><${Button} type="submit" variant="primary" busy=${f.busy} testid="ingestion-save">Save</${Button}></div>`}
      </${Card}></fieldset>
    </form>
    <${Card} title="Reprocess all documents">
      <p class="muted">Apply the current settings to documents already processed.</p>
      ${manage && html`<${Button} onClick=${reprocess} testid="ingestion-reprocess">Reprocess all documents</${Button}>`}
      ${progress && html`<${IngestionProgress} progress=${progress} />`}
    </${Card}>
  </div>`;
}
