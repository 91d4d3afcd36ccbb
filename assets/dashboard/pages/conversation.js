// One conversation: its messages (with citations, coverage and each turn's trace) and owner; an
// agent's answer can be saved as an eval case.

import { get } from "../api.js";
import { Badge, Card, ErrorBox, Loading, Meta, PageHeader, fmtDate, html, useAsync } from "../ui.js";
import { SaveAsEvalCase, useSavedCases } from "./evals.js";

export default function ConversationPage({ params }) {
  const res = useAsync(() => get("/history/chat/" + params.id), [params.id]);
  const c = res.data;
  const saved = useSavedCases(c ? c.agentId || "" : undefined);
  if (res.error) return html`<div class="page"><${PageHeader} title="Conversation" back=${["/app/conversations", "Conversations"]} /><${ErrorBox} error=${res.error} retry=${res.reload} /></div>`;
  if (!c) return html`<${Loading} />`;
  return html`<div class="page">
    <${PageHeader} title=${"Conversation …" + c.id.slice(-8)} back=${["/app/conversations", "Conversations"]}
      subtitle=${html`<${Badge}>${c.ownership ? c.ownership.state : "ai_owned"}</${Badge}> <span class="muted">${c.channel} · ${c.messageCount} messages · started ${fmtDate(c.createdAt)}</span>`} />
    <${Card} title="Details"><${Meta} items=${[
      ["Agent", html`<a href=${"/app/agents/" + c.agentId}>open agent</a>`], ["Revision", html`<span class="mono small">${c.revisionId || "—"}</span>`],
      ["Owner", c.ownership ? `${c.ownership.state}${c.ownership.reason ? " (" + c.ownership.reason + ")" : ""}` : "—"], ["Last activity", fmtDate(c.lastMessageAt)],
    ]} /></${Card}>
    <${Card} title="Messages">
      <div class="transcript tall" role="log" aria-label="Messages">
        ${(c.messages || []).map((m) => html`<div class=${"msg " + (m.role === "user" ? "msg-user" : "msg-assistant")} data-testid="history-message">
          <span class="sr-only">${m.role === "user" ? "Visitor" : "Assistant"}: </span>
          <p class="msg-text">${m.text}</p>
          ${m.turnFailure && html`<p class="failure">Turn ${m.turnFailure.eventStatus} at ${m.turnFailure.stage}.</p>`}
          ${m.citations && m.citations.length > 0 && html`<ol class="citations">${m.citations.map((x) => html`<li><a href=${`/app/documents/${x.documentId}?chunk=${x.chunkId}`} data-testid="citation">${x.title}</a></li>`)}</ol>`}
          ${m.role === "assistant" && html`<div class="msg-meta">
            ${m.answerCoverage && m.answerCoverage.coverage && html`<${Badge}>${m.answerCoverage.coverage}</${Badge}>`}
            ${m.outcome && html`<span class="muted">${m.outcome.replace(/_/g, " ")}</span>`}
            <span class="muted">${fmtDate(m.createdAt)}</span>
            ${m.traceId && html`<a href=${"/app/traces/" + m.traceId} data-testid="trace-link">Trace</a>`}
            ${m.source !== "human_agent" && html`<${SaveAsEvalCase} messageId=${m.id} caseId=${saved[m.id]} />`}
          </div>`}
        </div>`)}
      </div>
      ${c.hasMore && html`<p class="muted">Showing the first 200 messages.</p>`}
    </${Card}>
  </div>`;
}
