// Usage: the plan card (the account's profile: used against limit plus credits, the 80 % banner
// naming the kind that drives usage, the 100 % state), answers per day and per agent (with model
// tokens), the workspace's stored and monthly indexed bytes, documents and embeddings, with a chart
// of indexed bytes and embedding calls per day; the organization's totals for who may read them.

import { get } from "../api.js";
import { can } from "../session.js";
import { BarChart, Card, ErrorBox, Loading, PageHeader, Progress, Table, fmtBytes, fmtDate, fmtNum, html, useAsync } from "../ui.js";

function Stat({ label, value, sub }) {
  return html`<div class="stat"><div class="stat-value">${value}</div><div class="stat-label">${label}</div>${sub && html`<div class="muted small">${sub}</div>`}</div>`;
}
const lim = (m, f) => (m && m.limit !== null && m.limit !== undefined ? `of ${f(m.limit)}` : "no limit");

const KINDS = { conversation: "conversations", copilot: "copilot turns", test_run: "test runs", pulse_report: "audience reports" };

/** The plan card: the metered limit (conversations, else answers) against its cap. */
function PlanCard({ me }) {
  const c = me.monthlyConversations;
  const m = c || me.monthlyAnswers;
  if (!me.profile || !m || m.limit === null || m.limit === undefined) return null;
  const cap = m.limit + (c ? c.credits : 0);
  const share = cap > 0 ? m.used / cap : 1;
  const unit = c ? "conversations" : "answers";
  let driver = null;
  if (c) {
    const top = Object.entries(c.byKind || {}).sort((a, b) => b[1] - a[1])[0];
    driver = top && top[1] > 0 ? KINDS[top[0]] || top[0] : null;
  }
  return html`<${Card} title=${`Plan: ${me.profile.displayName}`} testid="plan-card">
    ${share >= 1
      ? html`<div class="alert alert-error" role="alert" data-testid="usage-full">The ${unit} limit for this month is reached: new answers are refused until ${fmtDate(m.resetAt)}${c ? " or until credits are added" : ""}.</div>`
      : share >= 0.8
        ? html`<div class="alert alert-warn" role="status" data-testid="usage-banner">${Math.floor(share * 100)} % of this month's ${unit} are used${driver ? html`, mostly by <strong>${driver}</strong>` : ""}.</div>`
        : null}
    <p data-testid="plan-used"><strong>${fmtNum(m.used)}</strong> of ${fmtNum(m.limit)} ${unit}${c && c.credits ? ` + ${fmtNum(c.credits)} credits` : ""} this month</p>
    <${Progress} value=${share} label=${`${unit} used`} tone=${share >= 1 ? "red" : share >= 0.8 ? "amber" : undefined} />
    <p class="muted small">Resets ${fmtDate(m.resetAt)}.</p>
  </${Card}>`;
}

function AnswerUsage({ me, agents }) {
  const names = Object.fromEntries((agents || []).map((a) => [a.id, a.name]));
  const days = (me.answersByDay || []).map((d) => ({ label: d.day, short: d.day.slice(5), values: [d.answers] }));
  return html`<div class="grid-2">
    <${Card} title="Answers per day" testid="usage-answers-chart">
      <${BarChart} title="Answers per day" data=${days} series=${[{ name: "Answers", tone: "blue" }]} />
    </${Card}>
    <${Card} title="Answers by agent" testid="usage-by-agent">
      <${Table} caption="Answers and model tokens by agent this month" rows=${me.byAgent || []} rowKey=${(r) => r.workspaceId + r.agentId}
        columns=${[
          { label: "Agent", render: (r) => names[r.agentId] || r.agentId },
          { label: "Answers", render: (r) => fmtNum(r.answers) },
          { label: "Input tokens", render: (r) => fmtNum(r.inputTokens) },
          { label: "Output tokens", render: (r) => fmtNum(r.outputTokens) },
        ]}
        empty=${html`<p class="muted">No answers this month.</p>`} />
    </${Card}>
  </div>`;
}

export default function Usage() {
  const res = useAsync(() => get("/usage"), []);
  const me = useAsync(() => get("/ee/usage-limits/me").catch(() => null), []);
  const agents = useAsync(() => get("/agents").then((a) => a.agents).catch(() => []), []);
  const org = useAsync(() => (can("organization.usage.read") ? get("/usage/organization") : Promise.resolve(null)), []);
  const u = res.data;
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!u) return html`<${Loading} />`;
  const days = (u.daily || []).map((d) => ({ label: d.day, short: d.day.slice(5), bytes: d.indexedBytes, calls: d.embeddingCalls }));
  return html`<div class="page">
    <${PageHeader} title="Usage" subtitle=${`This workspace. The month started ${u.monthlyIndexedBytes.periodStart} and resets ${fmtDate(u.monthlyIndexedBytes.resetAt)}.`} />
    ${me.data && html`<${PlanCard} me=${me.data} />`}
    ${me.data && html`<${AnswerUsage} me=${me.data} agents=${agents.data} />`}
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
