// Answer quality: chat turns and retrieval-only answers with their grounding, filters, and a
// chart of answered / partial / unanswered (and unclear) turns per day over the last 30 days,
// counted by the server (GET /quality/daily; only the agent filter applies to it).

import { get } from "../api.js";
import { setQuery } from "../router.js";
import { BarChart, Badge, Card, Empty, ErrorBox, Loading, PageHeader, Pager, Select, Table, fmtDate, html, useAsync, usePager } from "../ui.js";

const DAYS = 30;

const SERIES = [
  { key: "answered", name: "Answered", tone: "green" },
  { key: "partial", name: "Partial", tone: "amber" },
  { key: "unanswered", name: "Unanswered", tone: "red" },
  { key: "unclear", name: "Unclear", tone: "blue" },
];

/** Turns per UTC day by answer coverage, counted by the server: {data, series, total} for BarChart. */
async function loadDaily(agentId) {
  const r = await get("/quality/daily", { days: DAYS, agentId });
  const rows = (r && r.days) || [];
  // "Unclear" is charted only when some day has any.
  const series = SERIES.filter((s) => s.key !== "unclear" || rows.some((d) => Number(d.unclear) > 0));
  const data = rows.map((d) => ({ label: d.day, short: String(d.day).slice(5), values: series.map((s) => Number(d[s.key]) || 0) }));
  const total = data.reduce((n, d) => n + d.values.reduce((a, b) => a + b, 0), 0);
  return { data, series, total };
}

export default function Quality({ query }) {
  const filters = {
    groundingVerdict: query.groundingVerdict || "",
    hasUnsourcedClaims: query.hasUnsourcedClaims || "",
    hasInvalidSources: query.hasInvalidSources || "",
    agentId: query.agentId || "",
  };
  const key = JSON.stringify(filters);
  const agents = useAsync(() => get("/agents"), []);
  const list = (agents.data && agents.data.agents) || [];
  const chart = useAsync(() => loadDaily(filters.agentId), [filters.agentId]);
  const pager = usePager((cursor) => get("/quality/turns", { ...filters, cursor, limit: 50 }), "turns", [key]);
  const yn = [["", "Any"], ["true", "Yes"], ["false", "No"]];
  return html`<div class="page">
    <${PageHeader} title="Answer quality" subtitle="How well answers are backed by your documents. Grounded: every claim cites a retrieved passage. Unanswered turns show where your knowledge has gaps." />
    <${Card} title="Filters"><div class="filters">
      <${Select} label="Agent" name="agentId" value=${filters.agentId} className="field-inline" options=${[["", "All agents"], ...list.map((a) => [a.id, a.name])]} onChange=${(e) => setQuery({ agentId: e.currentTarget.value })} />
      <${Select} label="Grounding" name="groundingVerdict" value=${filters.groundingVerdict} className="field-inline" testid="quality-filter-verdict"
        options=${[["", "Any"], ["grounded", "Grounded"], ["degraded", "Degraded"], ["no_support", "No support"]]} onChange=${(e) => setQuery({ groundingVerdict: e.currentTarget.value })} />
      <${Select} label="Unsourced claims" name="hasUnsourcedClaims" value=${filters.hasUnsourcedClaims} className="field-inline" options=${yn} onChange=${(e) => setQuery({ hasUnsourcedClaims: e.currentTarget.value })} />
      <${Select} label="Invalid sources" name="hasInvalidSources" value=${filters.hasInvalidSources} className="field-inline" options=${yn} onChange=${(e) => setQuery({ hasInvalidSources: e.currentTarget.value })} />
    </div></${Card}>
    <${Card} title="Turns per day (last 30 days)" testid="quality-chart">
      ${chart.error ? html`<${ErrorBox} error=${chart.error} retry=${chart.reload} />` : !chart.data ? html`<${Loading} />`
        : html`<${BarChart} title="Turns per day by answer coverage" data=${chart.data.data} series=${chart.data.series} />
          <p class="hint">${chart.data.total ? "" : "No turns in the last 30 days. "}Days are UTC${filters.agentId ? ", for the selected agent" : ""}; the other filters apply to the table below.</p>`}
    </${Card}>
    <${Card} title="Turns">
      <${ErrorBox} error=${pager.error} retry=${pager.reload} />
      ${pager.loading && !pager.data ? html`<${Loading} />` : html`<${Table} caption="Turns" rowTestId="quality-row" rowKey=${(t) => t.turnId} rows=${pager.items} columns=${[
        { label: "When", render: (t) => fmtDate(t.createdAt), className: "nowrap" },
        { label: "Surface", render: (t) => t.surface },
        { label: "Outcome", render: (t) => html`<${Badge}>${t.outcome}</${Badge}>` },
        { label: "Coverage", render: (t) => (t.answerCoverage && t.answerCoverage.coverage ? html`<${Badge}>${t.answerCoverage.coverage}</${Badge}>` : "—") },
        { label: "Grounding", render: (t) => (t.grounding ? html`<${Badge}>${t.grounding.verdict}</${Badge}> <span class="muted small">${t.grounding.sourcedClaimCount}/${t.grounding.claimCount}</span>` : "—") },
        { label: "", render: (t) => html`<div class="row">${t.conversationId && html`<a href=${"/app/conversations/" + t.conversationId}>Conversation</a>`}
          <a href=${"/app/traces/" + t.traceId}>Trace</a></div>` },
      ]} empty=${html`<${Empty} title="No turns">Turns appear once visitors (or you, in Test chat on the published revision) ask questions.</${Empty}>`} />`}
      <${Pager} pager=${pager} label="turns" />
    </${Card}>
  </div>`;
}
