// A turn's trace: its stages drawn as a timeline (SVG), each stage's recorded outputs (ids,
// counts, decisions and timings only — traces hold no message or document text).

import { get } from "../api.js";
import { Badge, Card, ErrorBox, Json, Loading, Meta, PageHeader, fmtDate, html, useAsync } from "../ui.js";

export default function Trace({ params }) {
  const res = useAsync(() => get("/traces/" + params.id), [params.id]);
  const t = res.data;
  if (res.error) return html`<div class="page"><${PageHeader} title="Turn trace" /><${ErrorBox} error=${res.error} retry=${res.reload} /></div>`;
  if (!t) return html`<${Loading} />`;
  const stages = (t.trace && t.trace.stages) || [];
  const g = t.grounding;
  return html`<div class="page" data-testid="trace-page">
    <${PageHeader} title="Turn trace" back=${t.conversationId && t.surface !== "test" ? [`/app/conversations/${t.conversationId}`, "Conversation"] : ["/app/conversations", "Conversations"]}
      subtitle=${html`<span class="row"><${Badge}>${t.outcome}</${Badge}> <span class="muted">${t.surface} · ${t.route} · ${Number(t.trace && t.trace.durationMs || 0).toFixed(1)} ms · ${fmtDate(t.createdAt)}</span></span>`} />
    <${Card} title="Summary">
      <${Meta} items=${[
        ["Outcome", t.outcome], ["Route", t.route], ["Surface", t.surface],
        ["Coverage", t.answerCoverage ? `${t.answerCoverage.coverage || t.answerCoverage.availability}${t.answerCoverage.reason ? " · " + t.answerCoverage.reason.replace(/_/g, " ") : ""}` : "—"],
        ["Grounding", g ? `${g.verdict} · ${g.sourcedClaimCount}/${g.claimCount} claims sourced${g.invalidSourceCount ? ` · ${g.invalidSourceCount} invalid sources` : ""}` : "—"],
        ["Revision", t.revisionId ? html`<span class="mono small">${t.revisionId}</span>` : "draft"],
        ["Request", t.requestId ? html`<span class="mono small">${t.requestId}</span>` : "—"],
        ["Trace id", html`<span class="mono small">${t.traceId}</span>`],
      ]} />
    </${Card}>
    <${Card} title="Timeline">
      <${Timeline} stages=${stages} total=${t.trace && t.trace.durationMs} />
      <div class="stage-list">
        ${stages.map((s) => html`<details class="stage-detail" data-testid="trace-stage">
          <summary><strong>${s.kind.replace(/_/g, " ")}</strong> <${Badge}>${s.status}</${Badge}> <span class="muted small">${Number(s.durationMs).toFixed(2)} ms</span></summary>
          <${Json} value=${s.outputs} />
        </details>`)}
      </div>
    </${Card}>
  </div>`;
}

function Timeline({ stages, total }) {
  if (!stages.length) return html`<p class="muted">No stages recorded.</p>`;
  const t0 = Math.min(...stages.map((s) => Date.parse(s.startedAt)));
  const end = Math.max(...stages.map((s) => Date.parse(s.completedAt) || Date.parse(s.startedAt)));
  // Timestamps have millisecond resolution; durations are finer. Lay stages out by their
  // cumulative durations when the clock cannot tell them apart.
  const span = Math.max(end - t0, total || 0, 1);
  let cursor = 0;
  const rows = stages.map((s) => {
    const start = Math.max(Date.parse(s.startedAt) - t0, cursor);
    const dur = Math.max(Number(s.durationMs) || 0, 0);
    cursor = start + dur;
    return { s, start, dur };
  });
  const max = Math.max(span, cursor);
  const W = 900;
  const L = 170;
  const R = 70;
  const rowH = 26;
  const H = rows.length * rowH + 10;
  const x = (ms) => L + ((W - L - R) * ms) / max;
  return html`<svg class="timeline" viewBox=${`0 0 ${W} ${H}`} role="img" aria-label=${`Timeline of ${rows.length} stages over ${max.toFixed(1)} ms`}>
    ${rows.map((r, i) => html`<g>
      <rect x=${L} y=${i * rowH + 4} width=${W - L - R} height=${rowH - 8} class="lane" rx="3" />
      <text x="0" y=${i * rowH + rowH / 2 + 4}>${r.s.kind.replace(/_/g, " ")}</text>
      <rect x=${x(r.start)} y=${i * rowH + 6} width=${Math.max(2, x(r.start + r.dur) - x(r.start))} height=${rowH - 12} rx="2"
        class=${"tl-bar " + r.s.status}><title>${`${r.s.kind}: ${r.dur.toFixed(2)} ms (${r.s.status})`}</title></rect>
      <text x=${W - R + 6} y=${i * rowH + rowH / 2 + 4} class="tl-dur">${r.dur.toFixed(1)} ms</text>
    </g>`)}
  </svg>`;
}
