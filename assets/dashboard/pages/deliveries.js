// The delivery log: every webhook and email Steward sent (handoff notices and more), its status,
// and each attempt (outcome, HTTP status or SMTP answer, duration, error; never a body).

import { useState } from "../../vendor/hooks.mjs";
import { get } from "../api.js";
import { setQuery } from "../router.js";
import { Badge, Card, Empty, ErrorBox, Loading, Modal, PageHeader, Pager, Select, Table, fmtDate, html, useAsync, usePager } from "../ui.js";

const STATUSES = [["", "Any status"], ["pending", "Pending"], ["retry", "Retrying"], ["success", "Delivered"], ["failed", "Failed"], ["skipped", "Skipped"]];

export default function Deliveries({ query }) {
  const status = query.status || "";
  const channel = query.channel || "";
  const pager = usePager((cursor) => get("/deliveries", { status, channel, cursor, limit: 50 }), "deliveries", [status, channel]);
  const [open, setOpen] = useState(null);
  return html`<div class="page">
    <${PageHeader} title="Delivery log" subtitle="Webhooks and emails Steward sent for you. Failed webhooks are retried with backoff; an answer other than 408, 429 or 5xx, or an address the network guard refuses, ends a delivery." />
    <${Card} actions=${html`<div class="filters">
        <${Select} label="Status" name="status" value=${status} options=${STATUSES} className="field-inline" testid="delivery-status-filter"
          onChange=${(e) => setQuery({ status: e.currentTarget.value })} />
        <${Select} label="Channel" name="channel" value=${channel} options=${[["", "Webhooks and email"], ["webhook", "Webhooks"], ["email", "Email"]]} className="field-inline"
          onChange=${(e) => setQuery({ channel: e.currentTarget.value })} />
      </div>`}>
      <${ErrorBox} error=${pager.error} retry=${pager.reload} />
      ${pager.loading && !pager.data ? html`<${Loading} />` : html`<${Table} caption="Deliveries" rowTestId="delivery-row" rows=${pager.items} columns=${[
        { label: "When", render: (d) => fmtDate(d.createdAt), className: "nowrap" },
        { label: "What", render: (d) => html`<span class="mono small">${d.event}</span>` },
        { label: "To", render: (d) => html`<${Badge} tone="gray">${d.channel}</${Badge}> <span class="small">${d.target}</span>` },
        { label: "Status", render: (d) => html`<${Badge} testid="delivery-status">${d.status}</${Badge}>` },
        { label: "Attempts", render: (d) => d.attempts, className: "num" },
        { label: "Last error or answer", render: (d) => d.lastError ? html`<span class="small">${d.lastError}</span>` : "—" },
        { label: "", render: (d) => html`<button type="button" class="link" onClick=${() => setOpen(d.id)} data-testid="delivery-open">Attempts</button>` },
      ]} empty=${html`<${Empty} title=${status || channel ? "No deliveries match" : "Nothing sent yet"}>
        ${status || channel ? "Clear the filters to see every delivery." : "Handoff notices appear here once an agent hands a conversation to a person. Set where they go on an agent's settings or its contact_human skill."}
      </${Empty}>`} />`}
      <${Pager} pager=${pager} label="deliveries" />
    </${Card}>
    ${open && html`<${Attempts} id=${open} onClose=${() => setOpen(null)} />`}
  </div>`;
}

function Attempts({ id, onClose }) {
  const res = useAsync(() => get("/deliveries/" + id), [id]);
  const d = res.data;
  return html`<${Modal} open title="Delivery attempts" onClose=${onClose} wide testid="delivery-attempts">
    <${ErrorBox} error=${res.error} retry=${res.reload} />
    ${!d ? html`<${Loading} />` : html`
      <p><span class="mono small">${d.event}</span> → ${d.target}${d.conversationId && html` · <a href=${"/app/inbox/" + d.conversationId}>conversation</a>`}</p>
      <p class="muted small">Idempotency-Key <code>${d.idempotencyKey}</code> (the same on every attempt)</p>
      <${Table} caption="Attempts" rows=${d.log} rowKey=${(a) => a.attempt} columns=${[
        { label: "#", render: (a) => a.attempt, className: "num" },
        { label: "When", render: (a) => fmtDate(a.at), className: "nowrap" },
        { label: "Outcome", render: (a) => html`<${Badge}>${a.outcome}</${Badge}>` },
        { label: "Status", render: (a) => a.statusCode ?? "—", className: "num" },
        { label: "Duration", render: (a) => `${Math.round(a.durationMs)} ms`, className: "num" },
        { label: "Error or answer", render: (a) => a.error || "—" },
      ]} empty=${html`<p class="muted">No attempt yet.</p>`} />`}
  </${Modal}>`;
}
