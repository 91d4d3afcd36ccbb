// Usage: the workspace's stored and monthly indexed bytes, documents and embeddings, with a chart
// of indexed bytes and embedding calls per day; the organization's totals for who may read them.

import { get } from "../api.js";
import { can } from "../session.js";
import { BarChart, Card, ErrorBox, Loading, PageHeader, fmtBytes, fmtDate, fmtNum, html, useAsync } from "../ui.js";

function Stat({ label, value, sub }) {
  return html`<div class="stat"><div class="stat-value">${value}</div><div class="stat-label">${label}</div>${sub && html`<div class="muted small">${sub}</div>`}</div>`;
}
const lim = (m, f) => (m && m.limit !== null && m.limit !== undefined ? `of ${f(m.limit)}` : "no limit in this edition");

export default function Usage() {
  const res = useAsync(() => get("/usage"), []);
  const org = useAsync(() => (can("organization.usage.read") ? get("/usage/organization") : Promise.resolve(null)), []);
  const u = res.data;
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!u) return html`<${Loading} />`;
  const days = (u.daily || []).map((d) => ({ label: d.day, short: d.day.slice(5), bytes: d.indexedBytes, calls: d.embeddingCalls }));
  return html`<div class="page">
    <${PageHeader} title="Usage" subtitle=${`This workspace. The month started ${u.monthlyIndexedBytes.periodStart} and resets ${fmtDate(u.monthlyIndexedBytes.resetAt)}.`} />
    <div class="grid-3">
      <${Stat} label="Stored indexed text" value=${fmtBytes(u.storedIndexedBytes.used)} sub=${lim(u.storedIndexedBytes, fmtBytes)} />
      <${Stat} label="Indexed this month" value=${fmtBytes(u.monthlyIndexedBytes.used)} sub=${lim(u.monthlyIndexedBytes, fmtBytes)} />
      <${Stat} label="Stored documents" value=${fmtNum(u.storedDocuments.used)} sub=${lim(u.storedDocuments, fmtNum)} />
      <${Stat} label="Embedding calls this month" value=${fmtNum(u.embeddingsThisMonth.events)} sub=${`${fmtNum(u.embeddingsThisMonth.vectors)} vectors · ${fmtNum(u.embeddingsThisMonth.tokens)} tokens`} />
    </div>
    <div class="grid-2">
      <${Card} title="Indexed bytes per day" testid="usage-bytes-chart">
        <${BarChart} title="Indexed bytes per day" data=${days.map((d) => ({ ...d, values: [d.bytes] }))} series=${[{ name: "Indexed bytes", tone: "blue" }]} format=${fmtBytes} />
      </${Card}>
      <${Card} title="Embedding calls per day" testid="usage-calls-chart">
        <${BarChart} title="Embedding calls per day" data=${days.map((d) => ({ ...d, values: [d.calls] }))} series=${[{ name: "Embedding calls", tone: "green" }]} />
      </${Card}>
    </div>
    ${org.data && html`<${Card} title="Organization (all workspaces)"><div class="grid-3">
      <${Stat} label="Stored indexed text" value=${fmtBytes(org.data.storedIndexedBytes.used)} />
      <${Stat} label="Indexed this month" value=${fmtBytes(org.data.monthlyIndexedBytes.used)} />
      <${Stat} label="Stored documents" value=${fmtNum(org.data.storedDocuments.used)} />
      <${Stat} label="Embedding calls this month" value=${fmtNum(org.data.embeddingsThisMonth.events)} />
    </div></${Card}>`}
  </div>`;
}
