// Documents: the list (status filter, paging, a title filter on the page), uploads by drag and
// drop or file input with a progress bar per file, the workspace's ingestion progress polled
// live, and creating a document from text.

import { useEffect, useRef, useState } from "../../vendor/hooks.mjs";
import { get, post, upload } from "../api.js";
import { navigate, setQuery } from "../router.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Empty, ErrorBox, FormError, Input, Loading, Modal, PageHeader, Pager, Progress, Select, Table, TextArea,
  fmtBytes, fmtDate, fmtNum, html, toast, useForm, usePager, usePoll,
} from "../ui.js";

const STATUSES = [["", "All statuses"], ["queued", "Queued"], ["processing", "Processing"], ["ready", "Ready"], ["failed", "Failed"]];
const PARALLEL = 3;

export function StatusCell({ doc }) {
  return html`<div class="status-cell">
    <${Badge} testid="doc-status">${doc.status}</${Badge}>
    ${doc.status === "failed" && doc.failureReason && html`<p class="failure" data-testid="doc-failure">${doc.failureReason}</p>`}
  </div>`;
}

export default function Documents({ query }) {
  const manage = can("workspace.documents.manage");
  const status = query.status || "";
  const limit = Number(query.limit) || 50;
  const q = query.q || "";
  const [filter, setFilter] = useState(q);
  const [createOpen, setCreateOpen] = useState(false);
  const pager = usePager((cursor) => get("/document", { status, limit, cursor, q }), "documents", [status, limit, q]);
  // the title search runs on the server (every page, not just this one), a moment after typing stops
  useEffect(() => {
    if (filter.trim() === q) return undefined;
    const t = setTimeout(() => setQuery({ q: filter.trim() }), 250);
    return () => clearTimeout(t);
  }, [filter]);
  const busy = pager.items.some((d) => d.status === "queued" || d.status === "processing");
  usePoll(() => pager.reload(), 2000, busy);

  const rows = pager.items;
  const summary = pager.data && pager.data.summary;

  return html`<div class="page">
    <${PageHeader} title="Documents" subtitle="What your agents know. Upload files or paste text; each is split into chunks and indexed for search."
      actions=${manage && html`<${Button} onClick=${() => setCreateOpen(true)} testid="create-text-open">Create from text</${Button}>`} />

    ${manage && html`<${Uploader} onChange=${() => pager.reload()} />`}

    <${Card} title="All documents" testid="documents-card"
      actions=${html`<div class="filters">
        <${Input} label="Search titles" name="q" value=${filter} onInput=${(e) => setFilter(e.currentTarget.value)}
          testid="doc-filter" type="search" className="field-inline" />
        <${Select} label="Status" name="status" value=${status} options=${STATUSES} testid="doc-status-filter" className="field-inline"
          onChange=${(e) => setQuery({ status: e.currentTarget.value })} />
        <${Select} label="Per page" name="limit" value=${String(limit)} options=${["25", "50", "100", "200"]} className="field-inline"
          onChange=${(e) => setQuery({ limit: e.currentTarget.value === "50" ? "" : e.currentTarget.value })} />
      </div>`}>
      ${summary && html`<p class="summary" data-testid="doc-summary">
        ${fmtNum(summary.documentCount)} documents · ${fmtNum(summary.readyDocumentCount)} ready
        ${summary.pendingDocumentCount ? html` · ${fmtNum(summary.pendingDocumentCount)} in progress` : ""}
        ${summary.failedDocumentCount ? html` · <a href="/app/documents?status=failed">${fmtNum(summary.failedDocumentCount)} failed</a>` : ""}${" "}· <a href="/app/search">Search their contents</a></p>`}
      <${ErrorBox} error=${pager.error} retry=${pager.reload} />
      ${pager.loading && !pager.data ? html`<${Loading} />` : html`<${Table} caption="Documents" rowTestId="doc-row" rows=${rows}
        columns=${[
          { label: "Title", render: (d) => html`<a href=${"/app/documents/" + d.id} data-testid="doc-link">${d.title || "(untitled)"}</a>
            ${d.sourceFilename && d.sourceFilename !== d.title && html`<div class="muted small">${d.sourceFilename}</div>`}` },
          { label: "Status", render: (d) => html`<${StatusCell} doc=${d} />` },
          { label: "Format", render: (d) => d.detectedFormat || "text", className: "nowrap" },
          { label: "Size", render: (d) => fmtBytes(d.sourceSizeBytes || d.contentSizeBytes), className: "num" },
          { label: "Chunks", render: (d) => fmtNum(d.chunkCount), className: "num" },
          { label: "Rev.", render: (d) => d.revision, className: "num" },
          { label: "Updated", render: (d) => fmtDate(d.updatedAt), className: "nowrap" },
        ]}
        empty=${html`<${Empty} title=${status || q ? "No documents match" : "No documents yet"}>
          ${status || q ? "Clear the filters to see every document." : manage ? "Drop files above, or create a document from text. Your agents answer from what you add here." : "Ask someone who manages documents to add some."}
        </${Empty}>`} />`}
      <${Pager} pager=${pager} label="documents" />
    </${Card}>

    ${createOpen && html`<${CreateText} onClose=${() => setCreateOpen(false)} onCreated=${(d) => { setCreateOpen(false); navigate("/app/documents/" + d.id); }} />`}
  </div>`;
}

// ---------------------------------------------------------------- uploads

function Uploader({ onChange }) {
  const [files, setFiles] = useState([]);
  const [over, setOver] = useState(false);
  const [progress, setProgress] = useState(null);
  const inputRef = useRef(null);
  const queue = useRef([]);
  const running = useRef(0);

  const update = (key, patch) => setFiles((fs) => fs.map((f) => (f.key === key ? { ...f, ...patch } : f)));

  const pump = () => {
    while (running.current < PARALLEL && queue.current.length) {
      const item = queue.current.shift();
      running.current++;
      send(item).finally(() => { running.current--; pump(); });
    }
  };

  const send = async (item, attempt = 0) => {
    const fd = new FormData();
    fd.append("file", item.file, item.file.name);
    update(item.key, { state: "uploading", sent: 0, error: null });
    const up = upload("/document/import", fd, (p) => update(item.key, { sent: p }));
    try {
      const doc = await up.promise;
      update(item.key, { state: "uploaded", sent: 1, doc });
      onChange();
    } catch (e) {
      if (e.status === 429 && attempt < 5) {
        const wait = ((e.details && e.details.retryAfterSeconds) || 2) * 1000;
        update(item.key, { state: "waiting", error: null });
        await new Promise((r) => setTimeout(r, wait));
        return send(item, attempt + 1);
      }
      update(item.key, { state: "error", error: e.message });
    }
  };

  const add = (list) => {
    const items = Array.from(list).map((file, i) => ({ key: `${Date.now()}-${i}-${file.name}`, file, state: "pending", sent: 0 }));
    if (!items.length) return;
    setFiles((fs) => [...items, ...fs]);
    queue.current.push(...items);
    pump();
  };

  // Live status of the uploaded documents and the workspace's ingestion progress.
  const tracking = files.some((f) => f.state === "pending" || f.state === "uploading" || f.state === "waiting" ||
    (f.doc && (f.doc.status === "queued" || f.doc.status === "processing")));
  usePoll(async () => {
    const p = await get("/document/progress");
    setProgress(p);
    const open = files.filter((f) => f.doc && (f.doc.status === "queued" || f.doc.status === "processing"));
    const fresh = await Promise.all(open.map((f) => get("/document/" + f.doc.id).catch(() => null)));
    let changed = false;
    fresh.forEach((d, i) => {
      if (d && d.status !== open[i].doc.status) { update(open[i].key, { doc: d }); changed = true; }
    });
    if (changed) onChange();
  }, 1000, tracking);
  useEffect(() => { get("/document/progress").then(setProgress, () => {}); }, []);

  const onDrop = (e) => { e.preventDefault(); setOver(false); add(e.dataTransfer.files); };
  const done = files.filter((f) => f.doc && (f.doc.status === "ready" || f.doc.status === "failed")).length + files.filter((f) => f.state === "error").length;
  const overall = files.length ? (files.reduce((a, f) => a + (f.doc ? (f.doc.status === "ready" || f.doc.status === "failed" ? 1 : 0.6) : f.state === "error" ? 1 : (f.sent || 0) * 0.5), 0) / files.length) : 0;

  return html`<${Card} title="Upload" testid="upload-card">
    <div class=${"dropzone" + (over ? " over" : "")} data-testid="dropzone"
      onDragOver=${(e) => { e.preventDefault(); setOver(true); }} onDragLeave=${() => setOver(false)} onDrop=${onDrop}>
      <p><strong>Drop files here</strong>${" or "}<label class="link file-label" for="upload-input">choose files</label></p>
      <input id="upload-input" class="sr-only-input" type="file" multiple data-testid="upload-input" ref=${inputRef}
        onChange=${(e) => { add(e.currentTarget.files); e.currentTarget.value = ""; }} />
      <p class="hint">PDF, DOCX, XLSX, Markdown or plain text, up to 25 MB each.</p>
    </div>
    ${progress && html`<${IngestionProgress} progress=${progress} />`}
    ${files.length > 0 && html`<div class="uploads" data-testid="upload-list">
      <div class="uploads-head">
        <span aria-live="polite" data-testid="upload-overall-text">${done} of ${files.length} processed</span>
        <${Progress} value=${overall} label="Overall upload and processing progress" testid="upload-overall" />
        ${!tracking && html`<${Button} small onClick=${() => setFiles([])}>Clear</${Button}>`}
      </div>
      <ul class="upload-list">${files.map((f) => html`<${UploadRow} key=${f.key} f=${f} />`)}</ul>
    </div>`}
  </${Card}>`;
}

function UploadRow({ f }) {
  const d = f.doc;
  const state = f.state === "error" ? "failed" : d ? d.status : f.state;
  const label = { pending: "waiting", waiting: "waiting (server busy)", uploading: `uploading ${Math.round((f.sent || 0) * 100)}%` }[state] || state;
  return html`<li class="upload-item" data-testid="upload-item" data-status=${state}>
    <div class="upload-name">
      ${d ? html`<a href=${"/app/documents/" + d.id}>${f.file.name}</a>` : f.file.name}
      <span class="muted small"> · ${fmtBytes(f.file.size)}</span>
    </div>
    <${Progress} value=${state === "uploading" ? f.sent : state === "ready" || state === "failed" ? 1 : d ? undefined : 0}
      label=${"Upload of " + f.file.name} tone=${state === "failed" ? "red" : state === "ready" ? "green" : ""} />
    <${Badge} testid="upload-status">${label}</${Badge}>
    ${(f.error || (d && d.failureReason)) && html`<p class="failure" data-testid="upload-failure">${f.error || d.failureReason}</p>`}
  </li>`;
}

export function IngestionProgress({ progress: p }) {
  const total = p.queued + p.processing + p.ready + p.failed;
  return html`<div class="ingest" data-testid="ingestion-progress" aria-live="polite">
    <span>${p.idle ? "Idle: everything is processed." : "Processing…"}</span>
    <span class="muted">${fmtNum(p.queued)} queued · ${fmtNum(p.processing)} processing · ${fmtNum(p.ready)} ready · ${fmtNum(p.failed)} failed
      ${p.pendingChunks ? ` · ${fmtNum(p.pendingChunks)} chunks to index` : ""} · ${fmtNum(p.index && p.index.liveChunks)} chunks searchable</span>
    ${!p.idle && html`<${Progress} value=${total ? (p.ready + p.failed) / total : undefined} label="Workspace ingestion progress" testid="ingestion-bar" />`}
  </div>`;
}

// ---------------------------------------------------------------- create from text

function CreateText({ onClose, onCreated }) {
  const f = useForm({ title: "", content: "", metadata: "" });
  const submit = f.submit(async (v) => {
    const body = { title: v.title, content: v.content };
    if (v.metadata.trim()) {
      try { body.metadata = JSON.parse(v.metadata); } catch (e) {
        const err = new Error("Metadata is not valid JSON: " + e.message);
        err.field = "metadata";
        throw err;
      }
    }
    const doc = await post("/document", body);
    toast("Document created; it is being processed.");
    onCreated(doc);
  });
  return html`<${Modal} open title="Create a document from text" onClose=${onClose} wide testid="create-text-dialog">
    <form onSubmit=${submit} novalidate>
      <${FormError} error=${f.error} fields=${["title", "content", "metadata"]} />
      <${Input} form=${f} name="title" label="Title" required testid="create-text-title" />
      <${TextArea} form=${f} name="content" label="Content" rows="10" required testid="create-text-content" />
      <${TextArea} form=${f} name="metadata" label="Metadata (JSON, optional)" rows="3" placeholder='{"category": "policy"}'
        hint="Key–value pairs you can filter searches by." testid="create-text-metadata" />
      <div class="form-actions">
        <${Button} onClick=${onClose}>Cancel</${Button}>
        <${Button} type="submit" variant="primary" busy=${f.busy} testid="create-text-submit">Create</${Button}>
      </div>
    </form>
  </${Modal}>`;
}
