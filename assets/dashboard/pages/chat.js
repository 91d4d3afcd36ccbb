// Test chat: talk to an agent's published revision, its draft or any revision (private test
// executions), every answer streamed with its status stages, with citations that open the cited document,
// coverage and grounding badges, suggestions and a link to the turn's trace.

import { useEffect, useRef, useState } from "../../vendor/hooks.mjs";
import { get, post, put, stream } from "../api.js";
import { setQuery } from "../router.js";
import { can } from "../session.js";
import { Badge, Button, Card, Empty, ErrorBox, Loading, PageHeader, Select, html, useAsync, useId } from "../ui.js";
import { RoutineStatus } from "./routine-status.js";

const STAGES = ["interpreting", "searching", "composing"];

export default function Chat({ query }) {
  const manage = can("workspace.agents.manage");
  const agentsRes = useAsync(() => get("/agents"), []);
  const agents = (agentsRes.data && agentsRes.data.agents) || [];
  const agentId = query.agent || (agents.find((a) => a.isDefault) || agents[0] || {}).id;
  const target = query.target || "published";
  const revs = useAsync(() => (agentId && manage ? get(`/agents/${agentId}/revisions`, { include: "published" }) : Promise.resolve(null)), [agentId]);

  if (agentsRes.error) return html`<${ErrorBox} error=${agentsRes.error} retry=${agentsRes.reload} />`;
  if (!agentsRes.data) return html`<${Loading} />`;
  if (!agents.length) return html`<div class="page"><${PageHeader} title="Test chat" /><${Empty} title="No agents">Create an agent first. <a href="/app/agents">Agents</a></${Empty}></div>`;

  const revisions = (revs.data && revs.data.revisions) || [];
  const targets = [["published", "Published revision (live)"]];
  if (manage) {
    targets.push(["draft", "Draft (private test)"]);
    for (const r of revisions) targets.push([r.id, `${r.label} (${r.kind}, private test)`]);
  }
  const agent = agents.find((a) => a.id === agentId);

  return html`<div class="page">
    <${PageHeader} title="Test chat" subtitle="Ask what your visitors would ask. The published revision answers like the live channels; the draft and other revisions answer in private test conversations that never appear in history." />
    <div class="filters">
      <${Select} label="Agent" name="agent" value=${agentId} testid="chat-agent" className="field-inline"
        options=${agents.map((a) => [a.id, a.name + (a.isDefault ? " (default)" : "")])} onChange=${(e) => setQuery({ agent: e.currentTarget.value, target: "" })} />
      <${Select} label="Answer with" name="target" value=${target} testid="chat-target" className="field-inline"
        options=${targets} onChange=${(e) => setQuery({ target: e.currentTarget.value === "published" ? "" : e.currentTarget.value })} />
      ${agent && html`<a href=${"/app/agents/" + agent.id} class="btn btn-small">Agent settings</a>`}
    </div>
    <${Conversation} key=${agentId + target} agentId=${agentId} target=${target} />
  </div>`;
}

function Conversation({ agentId, target }) {
  const [messages, setMessages] = useState([]);
  const [text, setText] = useState("");
  const [running, setRunning] = useState(false);
  const [error, setError] = useState(null);
  const conv = useRef({ conversationId: null, executionId: null });
  const abort = useRef(null);
  const logRef = useRef(null);
  const inputId = useId("chat");

  useEffect(() => () => abort.current && abort.current.abort(), []);
  useEffect(() => { if (logRef.current) logRef.current.scrollTop = logRef.current.scrollHeight; }, [messages]);

  const updateLast = (patch) => setMessages((ms) => ms.map((m, i) => (i === ms.length - 1 ? { ...m, ...(typeof patch === "function" ? patch(m) : patch) } : m)));

  const send = async (message) => {
    const msg = (message || text).trim();
    if (!msg || running) return;
    setText("");
    setError(null);
    setRunning(true);
    setMessages((ms) => [...ms, { role: "user", text: msg }, { role: "assistant", text: "", stage: "sent", streaming: true }]);
    try {
      const ctrl = new AbortController();
      abort.current = ctrl;
      const onTurn = (event, data) => {
        if (event === "status") updateLast((m) => ({ stage: data.stage, stagesSeen: [...(m.stagesSeen || []), data.stage] }));
        else if (event === "chunk") updateLast((m) => ({ text: m.text + data.text, stage: "streaming" }));
        else if (event === "cancelled") updateLast({ streaming: false, stage: "cancelled", note: "A newer message replaced this turn." });
        else if (event === "error") updateLast({ streaming: false, stage: "error", note: (data.error && data.error.message) || "The turn failed." });
      };
      if (target === "published") {
        const body = { message: msg, stream: true };
        if (conv.current.conversationId) body.conversationId = conv.current.conversationId;
        await stream(`/agents/${agentId}/chat`, body, (event, data) => {
          if (event === "conversation") conv.current.conversationId = data.conversationId;
          else if (event === "done") updateLast({ reply: data, text: data.answer, streaming: false, stage: "done" });
          else onTurn(event, data);
        }, ctrl.signal);
      } else {
        if (!conv.current.executionId) {
          const body = { mode: "single" };
          if (target !== "draft") body.revisionIds = [target];
          const ex = await post(`/agents/${agentId}/test-executions`, body);
          conv.current.executionId = ex.id;
        }
        await stream(`/agents/${agentId}/test-executions/${conv.current.executionId}/messages`, { message: msg, stream: true }, (event, data) => {
          if (event === "reply") updateLast({ reply: data.reply, text: data.reply.answer, streaming: false, stage: "done" });
          else if (event === "done") {
            const reply = data.results && data.results[0] && data.results[0].reply;
            if (reply) updateLast({ reply, text: reply.answer, streaming: false, stage: "done" });
          } else onTurn(event, data);
        }, ctrl.signal);
      }
    } catch (e) {
      if (e.name !== "AbortError") { setError(e); updateLast({ streaming: false, stage: "error", note: e.message }); }
    } finally {
      setRunning(false);
      abort.current = null;
    }
  };

  const reset = () => { conv.current = { conversationId: null, executionId: null }; setMessages([]); setError(null); };

  return html`<div class="chat">
    <${Card} title="Conversation" actions=${html`<${Button} small onClick=${reset} disabled=${running} testid="chat-reset">New conversation</${Button}>`}>
      <div class="transcript" ref=${logRef} role="log" aria-label="Conversation" data-testid="chat-transcript">
        ${messages.length === 0 && html`<p class="muted">${target === "published" ? "Answers stream from the published revision." : "Answers stream from a private test run that visitors never see."} Start with a question your documents answer.</p>`}
        ${messages.map((m, i) => (m.role === "user"
          ? html`<div class="msg msg-user" data-testid="chat-user-message"><span class="sr-only">You: </span><span class="msg-text">${m.text}</span></div>`
          : html`<${AssistantMessage} key=${i} m=${m} onAsk=${send} disabled=${running} />`))}
      </div>
      <${ErrorBox} error=${error} />
      <form class="composer" onSubmit=${(e) => { e.preventDefault(); send(); }}>
        <div class="field">
          <label for=${inputId}>Message</label>
          <textarea id=${inputId} rows="2" value=${text} data-testid="chat-input" placeholder="Ask a question…"
            onInput=${(e) => setText(e.currentTarget.value)}
            onKeyDown=${(e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } }}></textarea>
          <p class="hint">Enter sends; Shift+Enter adds a line.</p>
        </div>
        ${running && abort.current
          ? html`<${Button} onClick=${() => abort.current && abort.current.abort()} testid="chat-stop">Stop</${Button}>`
          : html`<${Button} type="submit" variant="primary" busy=${running} disabled=${!text.trim()} testid="chat-send">Send</${Button}>`}
      </form>
    </${Card}>
    <${Card} title="About this test">
      <p class="small">${target === "published"
        ? "Runs exactly like a visitor's chat on the live revision. The conversation appears in Conversations."
        : "Runs privately on the chosen version; it never hands off and does not appear in history or the quality report."}</p>
      <p class="small muted">Badges: coverage is how completely the answer covers the question; grounding is whether each claim is backed by a cited passage.</p>
    </${Card}>
  </div>`;
}

function AssistantMessage({ m, onAsk, disabled }) {
  const r = m.reply;
  const d = (r && r.diagnostics) || {};
  const cov = r && r.answerCoverage;
  const citations = (r && r.citations) || [];
  const segments = r && r.answerSegments && r.answerSegments.length ? r.answerSegments : null;
  const docHref = (c) => `/app/documents/${c.documentId}?chunk=${c.chunkId}`;
  return html`<div class="msg msg-assistant" data-testid="chat-assistant-message" data-state=${m.stage} aria-busy=${m.streaming ? "true" : "false"}>
    <span class="sr-only">Assistant: </span>
    ${m.streaming && html`<div class="stages" data-testid="chat-stages" aria-label="Progress">
      ${STAGES.map((s) => {
        const seen = (m.stagesSeen || []).includes(s);
        const active = m.stage === s;
        return html`<span class=${"stage" + (active ? " active" : seen ? " done" : "")} data-testid="chat-stage" data-stage=${s}>${s}</span>`;
      })}
      ${m.stage === "waiting" && html`<span class="stage active" role="status" data-testid="chat-stage-waiting">waiting for the model</span>`}
    </div>`}
    ${segments && !m.streaming
      ? html`<p class="msg-text" data-testid="chat-answer">${segments.map((s) => html`${s.text}${(s.citationIndices || []).map((ci) => citations[ci] && html`<sup><a href=${docHref(citations[ci])} class="cite-ref" aria-label=${"Source " + (ci + 1) + ": " + citations[ci].title}>[${ci + 1}]</a></sup>`)} `)}</p>`
      : html`<p class="msg-text" data-testid="chat-answer">${m.text || (m.streaming ? "…" : "")}</p>`}
    ${m.note && html`<p class="failure">${m.note}</p>`}
    ${r && r.routine && html`<${RoutineStatus} routine=${r.routine} />`}
    ${citations.length > 0 && html`<ol class="citations" aria-label="Sources">${citations.map((c) => html`<li>
      <a href=${docHref(c)} data-testid="citation">${c.title || "document"}</a></li>`)}</ol>`}
    ${r && html`<div class="msg-meta">
      ${cov && cov.coverage && html`<${Badge} testid="coverage-badge" title=${cov.reason ? "reason: " + cov.reason.replace(/_/g, " ") : ""}>${cov.coverage}</${Badge}>`}
      ${cov && !cov.coverage && html`<${Badge} tone="gray" testid="coverage-badge">${cov.availability || "not recorded"}</${Badge}>`}
      ${d.grounding && html`<${Badge} testid="grounding-badge" title=${`${d.grounding.sourcedClaimCount}/${d.grounding.claimCount} claims sourced`}>${d.grounding.verdict}</${Badge}>`}
      ${d.outcome && html`<span class="muted">${d.outcome.replace(/_/g, " ")}</span>`}
      ${d.composer && html`<span class="muted">· ${d.composer.provider}/${d.composer.model}</span>`}
      ${r.traceId && html`<a href=${"/app/traces/" + r.traceId} data-testid="trace-link">View trace</a>`}
    </div>`}
    ${r && r.messageId && r.conversationId && html`<${Feedback} conversationId=${r.conversationId} messageId=${r.messageId} />`}
    ${r && r.suggestions && r.suggestions.length > 0 && html`<div class="suggestions">
      ${r.suggestions.map((s) => html`<${Button} small onClick=${() => onAsk(s.text)} disabled=${disabled} testid="suggestion">${s.text}</${Button}>`)}
    </div>`}
  </div>`;
}

/** Thumbs up or down on an answer, with an optional comment; a thumbs down lands in the Inbox. */
function Feedback({ conversationId, messageId }) {
  const [rating, setRating] = useState(null);
  const [asking, setAsking] = useState(false);
  const [comment, setComment] = useState("");
  const [error, setError] = useState(null);
  const path = `/history/chat/${conversationId}/messages/${messageId}/feedback`;
  const send = async (value, text) => {
    setError(null);
    try {
      await put(path, text ? { rating: value, comment: text } : { rating: value });
      setRating(value);
      setAsking(false);
    } catch (e) { setError(e); }
  };
  return html`<div class="feedback" data-testid="answer-feedback" data-rating=${rating || ""}>
    <${Button} small aria-pressed=${rating === "up" ? "true" : "false"} onClick=${() => send("up")} testid="feedback-up">Helpful</${Button}>
    <${Button} small aria-pressed=${rating === "down" ? "true" : "false"} onClick=${() => setAsking(true)} testid="feedback-down">Not helpful</${Button}>
    ${asking && html`<form class="row" onSubmit=${(e) => { e.preventDefault(); send("down", comment.trim()); }}>
      <label class="sr-only" for=${"fb-" + messageId}>What was wrong? (optional)</label>
      <input id=${"fb-" + messageId} placeholder="What was wrong? (optional)" value=${comment} maxlength="2000" onInput=${(e) => setComment(e.currentTarget.value)} data-testid="feedback-comment" />
      <${Button} small type="submit" testid="feedback-send">Send</${Button}>
    </form>`}
    ${rating && html`<span class="muted small" role="status">Thanks, noted.</span>`}
    ${error && html`<span class="failure" role="alert">${error.message}</span>`}
  </div>`;
}
