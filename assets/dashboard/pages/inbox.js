// The operator inbox: open handoffs (awaiting anyone, held by you, held by a teammate), routine
// approvals waiting for a decision (one button per option) and negative answer feedback, updated
// live from the workspace's event stream; a conversation view with take over, reply (a stale
// version is explained and reloaded), transfer and hand back; an agent's answer can be saved as an
// eval case.

import { useEffect, useRef, useState } from "../../vendor/hooks.mjs";
import { ApiError, get, listen, post } from "../api.js";
import { can, session } from "../session.js";
import { Badge, Button, Card, Empty, ErrorBox, Loading, PageHeader, Select, fmtDate, html, toast, useAsync, useId } from "../ui.js";
import { SaveAsEvalCase, useSavedCases } from "./evals.js";

const HELD = { nobody: "Awaiting an operator", me: "Held by you", teammate: "Held by a teammate" };

/** Calls `onChange(event, data)` for each event of the workspace's event stream, reconnecting when it ends; returns whether it is live. */
function useLive(onChange) {
  const cb = useRef(onChange);
  cb.current = onChange;
  const [live, setLive] = useState(false);
  useEffect(() => {
    const ctrl = new AbortController();
    let stopped = false;
    (async () => {
      while (!stopped) {
        try {
          await listen("/events", (event, data) => {
            if (event === "ready") setLive(true);
            else cb.current(event, data);
          }, ctrl.signal);
        } catch (e) {
          if (stopped || (e && e.name === "AbortError")) return;
        }
        setLive(false);
        // the stream ended (server restart, network): reconnect after a pause
        await new Promise((r) => setTimeout(r, 3000));
      }
    })();
    return () => { stopped = true; ctrl.abort(); };
  }, []);
  return live;
}

export default function Inbox({ params }) {
  const selected = params.id || null;
  const list = useAsync(() => get("/inbox"), []);
  const [tick, setTick] = useState(0);
  const items = (list.data && list.data.items) || [];
  const listed = useRef(new Set());
  listed.current = new Set(items.map((i) => i.conversationId));
  const routineNames = useRoutineNames(items);
  const later = useRef(null);
  useEffect(() => () => clearTimeout(later.current), []);
  const live = useLive((event, data) => {
    const cid = data && data.conversationId;
    // a new message only changes the list when its conversation is in it
    if (event !== "message.created" || (cid && listed.current.has(cid))) list.reload();
    // …or when its turn opened a routine approval (that turn announces only the message): look
    // again shortly, at most once per two seconds however busy the workspace is
    else if (!later.current) later.current = setTimeout(() => { later.current = null; list.reload(); }, 2000);
    if (cid && cid === selected) setTick((n) => n + 1);
  });

  return html`<div class="page">
    <${PageHeader} title="Inbox" subtitle="Conversations handed to a person, routine steps waiting for your approval and answers visitors marked as unhelpful. Handoffs come first, then approvals; the newest on top."
      actions=${html`<span class=${"live " + (live ? "on" : "off")} data-testid="inbox-live" role="status">${live ? "Live" : "Reconnecting…"}</span>`} />
    <div class="split">
      <${Card} title=${`Needs you (${items.length})`} className="split-list" testid="inbox-list">
        <${ErrorBox} error=${list.error} retry=${list.reload} />
        ${!list.data && !list.error ? html`<${Loading} />` : items.length === 0
          ? html`<${Empty} title="Nothing needs you">When an agent hands a conversation to a person, a routine waits for an approval, or a visitor marks an answer as unhelpful, it appears here at once.</${Empty}>`
          : html`<ul class="inbox-items">${items.map((it) => (it.kind === "approval"
            ? html`<${ApprovalItem} key=${"approval" + it.decision.handle} it=${it} routineName=${routineNames[it.decision.routineId]} active=${it.conversationId === selected} onDecided=${list.reload} />`
            : html`<${Item} key=${it.kind + (it.feedback ? it.feedback.messageId : it.conversationId)} it=${it} active=${it.conversationId === selected} />`))}</ul>`}
      </${Card}>
      <div class="split-main">
        ${selected ? html`<${Conversation} key=${selected} id=${selected} tick=${tick} feedback=${items.filter((i) => i.kind === "feedback" && i.conversationId === selected)}
            approvals=${items.filter((i) => i.kind === "approval" && i.conversationId === selected)} routineNames=${routineNames} onChange=${list.reload} />`
          : html`<${Card} title="Conversation"><p class="muted">Choose an item to see the conversation.</p></${Card}>`}
      </div>
    </div>
  </div>`;
}

function Item({ it, active }) {
  const href = "/app/inbox/" + it.conversationId;
  if (it.kind === "handoff") {
    const last = it.lastMessage;
    return html`<li class=${"inbox-item" + (active ? " active" : "")} data-testid="inbox-item" data-kind="handoff" data-held=${it.heldBy}>
      <a href=${href}>
        <span class="inbox-head"><${Badge} tone=${it.heldBy === "nobody" ? "amber" : "blue"}>${HELD[it.heldBy]}</${Badge}>
          <span class="muted small">${fmtDate(it.lastMessageAt || it.updatedAt)}</span></span>
        <span class="inbox-line">${last ? last.text : "(no messages)"}</span>
        <span class="muted small">${reasonText(it.ownership.reason)}${it.ownership.ownerDisplayName ? " · " + it.ownership.ownerDisplayName : ""}</span>
      </a>
    </li>`;
  }
  return html`<li class=${"inbox-item" + (active ? " active" : "")} data-testid="inbox-item" data-kind="feedback">
    <a href=${href}>
      <span class="inbox-head"><${Badge} tone="red">Unhelpful answer</${Badge}><span class="muted small">${fmtDate(it.updatedAt)}</span></span>
      <span class="inbox-line">${it.feedback.comment || it.answer.text}</span>
    </a>
  </li>`;
}

function reasonText(r) {
  if (r === "retrieval_miss") return "Nothing in the documents answered";
  if (r === "routine_handoff") return "A routine asked for a person";
  if (r === "operator_takeover") return "Taken over by an operator";
  return r || "";
}

function Conversation({ id, tick, feedback, approvals, routineNames, onChange }) {
  const res = useAsync(() => get("/history/chat/" + id), [id, tick]);
  const members = useAsync(() => (can("organization.members.manage") ? get("/account/members") : Promise.resolve(null)), []);
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [target, setTarget] = useState("");
  const replyId = useId("reply");
  const logRef = useRef(null);
  useEffect(() => { if (logRef.current) logRef.current.scrollTop = logRef.current.scrollHeight; }, [res.data]);
  const saved = useSavedCases(res.data ? res.data.agentId || "" : undefined);

  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  const c = res.data;
  if (!c) return html`<${Loading} />`;
  const o = c.ownership;
  const me = session();
  const myId = me && me.user && me.user.id;
  const mine = o.state === "human_owned" && o.ownerAccountId === myId;
  const teammate = o.state === "human_owned" && o.ownerAccountId && o.ownerAccountId !== myId;

  const act = async (what, fn) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
      onChange();
      res.reload();
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) {
        setError(new ApiError(409, e.code, conflictText(e), null));
        res.reload();
      } else setError(e);
      return false;
    } finally {
      setBusy(false);
    }
  };
  const reply = async (e) => {
    e.preventDefault();
    const message = text.trim();
    if (!message) return;
    if (await act("reply", () => post(`/conversations/${id}/reply`, { message, expectedVersion: o.version }))) setText("");
  };
  const others = ((members.data && members.data.members) || []).filter((m) => m.userId !== myId);

  return html`<${Card} title=${"Conversation …" + id.slice(-8)} testid="inbox-conversation"
    actions=${html`<a href=${"/app/conversations/" + id} class="btn btn-small">Details & traces</a>`}>
    <p data-testid="inbox-ownership" data-state=${o.state} class="ownership-line">
      <${Badge} tone=${o.state === "human_owned" ? "amber" : "blue"}>${o.state === "human_owned" ? "A person answers" : "The agent answers"}</${Badge}>
      ${" "}${o.state === "human_owned" ? (o.ownerDisplayName ? `Held by ${mine ? "you" : o.ownerDisplayName}` : "Awaiting an operator") : ""}
      ${o.reason && html` <span class="muted">· ${reasonText(o.reason)}</span>`}
    </p>
    <div class="transcript tall" role="log" aria-label="Messages" ref=${logRef}>
      ${(c.messages || []).map((m) => html`<div class=${"msg " + (m.role === "user" ? "msg-user" : "msg-assistant")} data-testid="inbox-message" data-source=${m.source}>
        <span class="msg-who">${m.role === "user" ? "Visitor" : m.source === "human_agent" ? (m.operatorDisplayName || "Operator") : "Agent"}</span>
        <p class="msg-text">${m.text}</p>
        <span class="muted small">${fmtDate(m.createdAt)}</span>
        ${m.role === "assistant" && m.source !== "human_agent" && html`<div class="msg-meta"><${SaveAsEvalCase} messageId=${m.id} caseId=${saved[m.id]} /></div>`}
      </div>`)}
    </div>
    ${feedback.map((f) => html`<div class="alert alert-warn" data-testid="inbox-feedback">
      <p><strong>Marked unhelpful</strong>${f.feedback.comment ? ": " : ""}${f.feedback.comment || ""}</p>
      <p class="muted small">On the answer: ${f.answer.text}</p>
      <${Button} small onClick=${() => act("resolve", () => post(`/inbox/feedback/${f.feedback.messageId}/resolve`, {}))} testid="feedback-done">Done</${Button}>
    </div>`)}
    ${approvals.map((a) => html`<div class="alert alert-warn rt-approval-pane" data-testid="inbox-approval" key=${a.decision.handle}>
      <${ApprovalBody} it=${a} routineName=${routineNames[a.decision.routineId]} onDecided=${() => { onChange(); res.reload(); }} inPane />
    </div>`)}
    ${error && html`<div class="alert alert-error" role="alert" data-testid="inbox-conflict">${error.message}</div>`}
    ${can("workspace.conversation.takeover") && html`
      <form class="reply" onSubmit=${reply}>
        <label for=${replyId}>${teammate ? "A teammate holds this conversation; transfer it to reply" : "Reply to the visitor"}</label>
        <textarea id=${replyId} rows="3" value=${text} onInput=${(e) => setText(e.currentTarget.value)} disabled=${busy || teammate}
          data-testid="inbox-reply-input" maxlength="50000"></textarea>
        <div class="row">
          <${Button} type="submit" variant="primary" busy=${busy} disabled=${!text.trim() || teammate} testid="inbox-reply-send">Send${o.state === "ai_owned" || !o.ownerAccountId ? " and take over" : ""}</${Button}>
          ${!mine && !teammate && html`<${Button} onClick=${() => act("takeover", () => post(`/conversations/${id}/takeover`, {}))} disabled=${busy} testid="inbox-takeover">Take over</${Button}>`}
          ${o.state === "human_owned" && html`<${Button} onClick=${() => act("handback", () => post(`/conversations/${id}/handback`, { expectedVersion: o.version }))} disabled=${busy} testid="inbox-handback">Done: hand back to the agent</${Button}>`}
        </div>
      </form>
      ${o.state === "human_owned" && others.length > 0 && html`<div class="row transfer">
        <${Select} label="Transfer to" name="transfer" value=${target} options=${[["", "Choose a teammate"], ...others.map((m) => [m.userId, m.name || m.email])]}
          onChange=${(e) => setTarget(e.currentTarget.value)} testid="inbox-transfer-target" className="field-inline" />
        <${Button} disabled=${!target || busy} onClick=${() => act("transfer", () => post(`/conversations/${id}/transfer`, { toAccountId: target, expectedVersion: o.version }))} testid="inbox-transfer">Transfer</${Button}>
      </div>`}`}
  </${Card}>`;
}

function conflictText(e) {
  const code = e.details && e.details.code;
  if (code === "held_by_teammate") return "A teammate holds this conversation now. Ask them to transfer it to you.";
  if (code === "not_human_owned") return "The agent answers this conversation again; nothing to hand back.";
  return "Someone changed this conversation while you were looking at it. It has been reloaded: check the latest messages, then try again.";
}

// ---------------------------------------------------------------- routine approvals

/** routineId → name, for the agents that have approvals waiting (names only make the list easier to read). */
function useRoutineNames(items) {
  const agents = [...new Set(items.filter((i) => i.kind === "approval").map((i) => i.decision.agentId))].sort();
  const res = useAsync(async () => {
    const names = {};
    await Promise.all(agents.map(async (a) => {
      try {
        const r = await get(`/agents/${a}/routines`);
        for (const x of r.routines || []) names[x.id] = x.name;
      } catch { /* names are a nicety: the step id still shows */ }
    }));
    return names;
  }, [agents.join(",")]);
  return res.data || {};
}

function ApprovalItem({ it, routineName, active, onDecided }) {
  return html`<li class=${"rt-approval" + (active ? " active" : "")} data-testid="inbox-item" data-kind="approval" data-handle=${it.decision.handle}>
    <${ApprovalBody} it=${it} routineName=${routineName} onDecided=${onDecided} />
  </li>`;
}

/** What a routine asks a person to decide, and one button per option; the decision carries the item's content hash. */
function ApprovalBody({ it, routineName, onDecided, inPane }) {
  const d = it.decision;
  const [busy, setBusy] = useState(null);
  const [note, setNote] = useState(null);
  const headId = useId("approval");
  const decide = async (o) => {
    setBusy(o.id);
    setNote(null);
    try {
      const r = await post(`/agents/${d.agentId}/decisions/${d.handle}/resolve`, { optionId: o.id, contentHash: d.contentHash });
      toast(`Decided: ${o.label}. ${r.resumed ? "The routine continues in the conversation." : "The routine follows it when the conversation is handed back to the agent."}`);
      onDecided();
    } catch (e) {
      const code = (e.details && e.details.code) || e.code;
      if (code === "already_resolved" || code === "concurrent_resolution") {
        toast("Someone decided this approval already; it has left the inbox.", "info");
        onDecided();
      } else if (code === "stale_proposal") {
        setNote({ tone: "warn", text: "The proposal changed since you loaded it, so your choice was not applied. It has been reloaded: read it again and decide." });
        onDecided();
      } else if (code === "invalid_option") {
        setNote({ tone: "warn", text: "That option is no longer offered. The approval has been reloaded: choose one of its current options." });
        onDecided();
      } else if (code === "forbidden_decider" || e.status === 403) {
        setNote({ tone: "error", text: "Your role may not decide approvals." });
      } else {
        setNote({ tone: "error", text: e.message });
      }
    } finally {
      setBusy(null);
    }
  };
  const described = (d.options || []).filter((o) => o.description);
  return html`<div class="rt-approval-body">
    <span class="inbox-head"><${Badge} tone="amber">Approval needed</${Badge}><span class="muted small">${fmtDate(d.createdAt || it.updatedAt)}</span></span>
    <p class="rt-approval-reason" id=${headId} data-testid="approval-reason">${d.reason || "A routine step waits for a decision."}</p>
    <p class="muted small rt-approval-meta">${routineName ? html`Routine “${routineName}”` : "A routine"}, step <code>${d.stepId}</code>
      ${d.deadline && html` · decide by ${fmtDate(d.deadline)}`}
      ${!inPane && html` · <a href=${"/app/inbox/" + it.conversationId} data-testid="approval-conversation">Open the conversation</a>`}</p>
    <div class="rt-approval-options" role="group" aria-labelledby=${headId}>
      ${(d.options || []).map((o) => html`<${Button} small busy=${busy === o.id} disabled=${!!busy}
        onClick=${() => decide(o)} testid="approval-option" data-option=${o.id} title=${o.description || undefined}>${o.label}</${Button}>`)}
    </div>
    ${described.length > 0 && html`<ul class="rt-approval-notes small muted">${described.map((o) => html`<li><strong>${o.label}</strong>: ${o.description}</li>`)}</ul>`}
    ${note && html`<p class=${"rt-approval-note rt-note-" + note.tone} role=${note.tone === "error" ? "alert" : "status"} data-testid="approval-note">${note.text}</p>`}
  </div>`;
}
