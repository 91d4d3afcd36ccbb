// Routines: the agent's multi-step flows. The list (enable, edit, delete), an editor for the
// portable markdown checked live against the server's grammar (diagnostics with their line, a
// Format button for the canonical text), the server's validation findings on save, a read-only
// view of routines markdown cannot express, and a drawing of the selected routine's graph.

import { useEffect, useRef, useState } from "../../vendor/hooks.mjs";
import { ApiError, del, get, post, put } from "../api.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Empty, ErrorBox, Loading, Modal, Table, confirm, fmtDate, html, toast, useAsync, useId,
} from "../ui.js";
import { RoutineDiagram, clip } from "./routine-diagram.js";

/** The grammar reference's example B: a good start that shows slots, a branch, a decision and an action. */
export const TEMPLATE = `---
grammar: 1
name: Refund over threshold
trigger: shopper asks for money back on an order
reentry: always
end: done ("Your refund request is closed.")
vars: order_ref:text:mutable, amount:number, contact:email
---
# Collect
Ask for the @order_ref, the refund @amount and a @contact address.
[if amount < 50] -> step:pay
# Review
Say a manager must check the refund. [decision refund_call: approve="Approve refund", deny="Decline" ("Explain why")]
[if refund_call = approve] -> step:pay
[if refund_call = deny] -> end:declined ("We could not approve this refund.")
# Pay
[action contact.send]
`;

const LINE_H = 20; // px: the editor's line height (style.css .rt-code)

/** A markdown heading's step id (the grammar's slug rule). */
function slug(title) {
  let s = title.toLowerCase().replace(/[^a-z0-9_]+/g, "_").replace(/_+/g, "_").replace(/^_|_$/g, "");
  if (!s) s = "value";
  if (/^[0-9]/.test(s)) s = "_" + s;
  return s;
}

/** The 1-based line a validation location points at in `text`, or null. */
export function lineOfLocation(text, location) {
  const lines = text.split("\n");
  const m = /^(step|transition|slot):(.+)$/.exec(location || "");
  if (!m) return null;
  if (m[1] === "slot") {
    const key = m[2];
    const at = lines.findIndex((l) => new RegExp(`@${key}(?![A-Za-z0-9_])`).test(l));
    if (at >= 0) return at + 1;
    const v = lines.findIndex((l) => /^vars:/.test(l.trim()));
    return v >= 0 ? v + 1 : null;
  }
  const id = m[1] === "step" ? m[2] : m[2].split("->")[0];
  const h = lines.findIndex((l) => l.startsWith("# ") && slug(l.slice(2)) === id);
  if (h >= 0) return h + 1;
  const target = m[1] === "transition" ? m[2].split("->")[1] : null;
  if (target) {
    const t = lines.findIndex((l) => l.includes(`step:${target}`) || l.includes(`end:${target}`));
    if (t >= 0) return t + 1;
  }
  return null;
}

function stepCount(r) {
  return ((r.definition && r.definition.steps) || []).length;
}

export default function Routines({ agent, onChanged }) {
  const manage = can("workspace.agents.manage");
  const res = useAsync(() => get(`/agents/${agent.id}/routines`), [agent.id]);
  const [selected, setSelected] = useState(null);
  const [editing, setEditing] = useState(null); // {routine|null, content, readOnly} | {routine, notPortable}
  const [busy, setBusy] = useState(null);
  const routines = (res.data && res.data.routines) || [];
  const shown = routines.find((r) => r.id === selected) || routines[0] || null;

  const changed = (id) => { res.reload(); onChanged(); if (id) setSelected(id); };

  const open = async (r) => {
    if (!r) { setEditing({ routine: null, content: TEMPLATE, readOnly: !manage }); return; }
    setBusy("open-" + r.id);
    try {
      const p = await get(`/agents/${agent.id}/routines/${r.id}/portable`);
      setEditing({ routine: r, content: p.content, readOnly: !manage });
    } catch (e) {
      if (e instanceof ApiError && e.code === "routine_not_portable") setEditing({ routine: r, notPortable: e });
      else toast(e.message, "error");
    } finally { setBusy(null); }
  };
  const toggle = async (r) => {
    setBusy("toggle-" + r.id);
    try {
      await put(`/agents/${agent.id}/routines/${r.id}`, { version: r.version, definition: { ...r.definition, enabled: !r.enabled } });
      toast(`“${r.name}” ${r.enabled ? "disabled" : "enabled"} in the draft.`);
      changed();
    } catch (e) { toast(e.message, "error"); } finally { setBusy(null); }
  };
  const remove = async (r) => {
    if (!(await confirm({ title: "Delete routine?", message: `“${r.name}” (version ${r.version}) will be removed from the draft. Conversations on the published revision keep it until you publish.`, confirmLabel: "Delete routine", danger: true }))) return;
    try {
      await del(`/agents/${agent.id}/routines/${r.id}`);
      toast("Routine deleted from the draft.");
      if (selected === r.id) setSelected(null);
      changed();
    } catch (e) { toast(e.message, "error"); }
  };
  const exportsOff = !agent.webhookExportsEnabled && routines.some((r) => r.definition.completionExport && r.definition.completionExport.enabled);
  const enableExports = async () => {
    setBusy("exports");
    try { await put(`/agents/${agent.id}`, { webhookExportsEnabled: true }); toast("Webhook exports turned on in the draft."); onChanged(); } catch (e) { toast(e.message, "error"); } finally { setBusy(null); }
  };

  return html`<div class="stack">
    <${Card} title="Routines" testid="routines-card"
      actions=${manage && html`<${Button} variant="primary" onClick=${() => open(null)} testid="routine-new">New routine</${Button}>`}>
      <p class="muted">A routine walks a visitor through steps — collecting typed values, calling a skill, waiting for a person's approval — and ends by completing or handing off. It starts when a message matches its trigger.</p>
      <p class="alert alert-info rt-draft-note" data-testid="routines-draft-note">Changes go to the agent's draft. Visitors get them after you <a href=${`/app/agents/${agent.id}/revisions`}>review and publish the draft</a>; test the draft first in <a href=${`/app/chat?agent=${agent.id}&target=draft`}>Test chat</a>.</p>
      ${exportsOff && html`<div class="alert alert-warn row" data-testid="routines-exports-off">
        <span class="grow">A routine sends its result to a webhook destination, but this agent's webhook exports are off: those deliveries are recorded as skipped.</span>
        ${manage && html`<${Button} small onClick=${enableExports} busy=${busy === "exports"}>Turn exports on</${Button}>`}
      </div>`}
      <${ErrorBox} error=${res.error} retry=${res.reload} />
      ${!res.data && !res.error ? html`<${Loading} />` : html`<${Table} caption="Routines of the agent" rowTestId="routine-row" rows=${routines} columns=${[
        { label: "Routine", render: (r) => html`<strong data-testid="routine-name">${r.name}</strong>` },
        { label: "Version", render: (r) => r.version, className: "num" },
        { label: "Enabled", render: (r) => (manage
          ? html`<${Switch} label=${`${r.name} enabled`} checked=${r.enabled} disabled=${busy === "toggle-" + r.id} onChange=${() => toggle(r)} testid="routine-enabled" />`
          : html`<${Badge} tone=${r.enabled ? "green" : "gray"}>${r.enabled ? "enabled" : "disabled"}</${Badge}>`) },
        { label: "Steps", render: (r) => stepCount(r), className: "num" },
        { label: "Trigger", render: (r) => html`<span class="rt-trigger" title=${r.definition.activation.triggerDescription}>${clip(r.definition.activation.triggerDescription, 90)}</span>` },
        { label: "Updated", render: (r) => fmtDate(r.updatedAt), className: "nowrap" },
        { label: html`<span class="sr-only">Actions</span>`, className: "nowrap", render: (r) => html`<div class="row rt-row-actions">
          <${Button} small onClick=${() => setSelected(r.id)} aria-pressed=${shown && shown.id === r.id ? "true" : "false"} testid="routine-show"
            aria-label=${`Diagram of ${r.name}`}>Diagram</${Button}>
          <${Button} small onClick=${() => open(r)} busy=${busy === "open-" + r.id} testid="routine-edit" aria-label=${`${manage ? "Edit" : "View"} ${r.name}`}>${manage ? "Edit" : "View"}</${Button}>
          ${manage && html`<${Button} small variant="danger" onClick=${() => remove(r)} testid="routine-delete" aria-label=${`Delete ${r.name}`}>Delete</${Button}>`}
        </div>` },
      ]} empty=${html`<${Empty} title="No routines yet">Write one in portable markdown: a few lines describe the steps, the values to collect and where each branch leads.</${Empty}>`} />`}
    </${Card}>
    ${shown && html`<${DiagramCard} key=${shown.id + shown.updatedAt} agent=${agent} routine=${shown} />`}
    ${editing && !editing.notPortable && html`<${RoutineEditor} agent=${agent} routine=${editing.routine} initial=${editing.content} readOnly=${editing.readOnly}
      onClose=${() => setEditing(null)} onSaved=${(id) => { setEditing(null); changed(id); }} />`}
    ${editing && editing.notPortable && html`<${NotPortable} routine=${editing.routine} error=${editing.notPortable} agent=${agent} onClose=${() => setEditing(null)} />`}
  </div>`;
}

/** An on/off switch (a checkbox with the switch role) with a visually hidden label. */
function Switch({ label, checked, onChange, disabled, testid }) {
  const id = useId("rt-switch");
  return html`<span class="rt-switch-wrap">
    <input type="checkbox" role="switch" id=${id} class="rt-switch" checked=${checked} disabled=${disabled}
      onChange=${onChange} data-testid=${testid} />
    <label for=${id} class="sr-only">${label}</label>
    <span class="rt-switch-state" aria-hidden="true">${checked ? "On" : "Off"}</span>
  </span>`;
}

function DiagramCard({ agent, routine }) {
  const res = useAsync(() => get(`/agents/${agent.id}/routines/${routine.id}`), [agent.id, routine.id]);
  const r = res.data;
  const def = r && r.definition;
  const ex = def && def.completionExport;
  return html`<${Card} title=${`Diagram: ${routine.name}`} testid="routine-diagram-card">
    <${ErrorBox} error=${res.error} retry=${res.reload} />
    ${!r ? !res.error && html`<${Loading} />` : html`
      <p class="muted small rt-facts">
        Version ${r.version} · ${r.enabled ? "enabled" : "disabled"} · starts when: “${def.activation.triggerDescription}”
        ${def.activation.priority ? ` · priority ${def.activation.priority}` : ""}
        ${def.activation.reentryMode && def.activation.reentryMode !== "once_per_conversation" ? ` · re-entry ${def.activation.reentryMode.replace(/_/g, " ")}` : ""}
        ${(def.slots || []).length ? html` · collects ${(def.slots || []).map((s, i) => html`${i ? ", " : ""}<code>${s.key}</code> <span class="rt-type">${s.type}${s.required ? "" : ", optional"}</span>`)}` : ""}
        ${ex && ex.enabled ? html` · exports ${ex.triggerKinds.join(" and ")} endings to <a href="/app/settings/webhook-destinations">destination <code>${clip(ex.destinationRef, 13)}</code></a>` : ""}
      </p>
      <${RoutineDiagram} routine=${r} />`}
  </${Card}>`;
}

/** Routines markdown v1 cannot express: the structured definition, read-only. */
function NotPortable({ routine, error, agent, onClose }) {
  const diags = (error.details && error.details.diagnostics) || [];
  return html`<${Modal} open wide title=${`“${routine.name}” (read-only)`} onClose=${onClose} testid="routine-readonly"
    footer=${html`<${Button} onClick=${onClose} testid="routine-readonly-close">Close</${Button}>`}>
    <div class="alert alert-info" role="status">
      <p><strong>Portable markdown cannot express this routine.</strong> ${diags.length ? diags.map((d) => d.message).join("; ") : error.message}.</p>
      <p class="small">It was written through the structured API (or a bundle) and uses something the markdown grammar has no words for, so it is shown here as its structured definition. Change it through <code>PUT /api/v1/agents/${agent.id}/routines/${routine.id}</code>; the diagram, the switch and Delete work as for any routine.</p>
    </div>
    <pre class="json rt-json" tabindex="0" role="region" aria-label="The structured definition (JSON)" data-testid="routine-json">${JSON.stringify(routine.definition, null, 2)}</pre>
  </${Modal}>`;
}

/** The markdown editor: line numbers, live grammar diagnostics (debounced), Format, Save. */
function RoutineEditor({ agent, routine, initial, readOnly, onClose, onSaved }) {
  const [text, setText] = useState(initial);
  const [check, setCheck] = useState({ state: readOnly ? "off" : "checking", diagnostics: [], canonical: null, for: null });
  const [saveError, setSaveError] = useState(null); // {error, text}: the last refused save and the text it refused
  const [saving, setSaving] = useState(false);
  const [caret, setCaret] = useState({ line: 1, col: 1 });
  const seq = useRef(0);
  const ref = useRef(null);
  const gutter = useRef(null);
  const finished = useRef(false); // saved or closed: the dialog's late close event must not ask again
  const id = useId("rt-md");

  const canonicalize = async (content) => {
    const n = ++seq.current;
    try {
      const r = await post("/routines/portable/canonicalize", { grammarVersion: 1, content });
      if (n === seq.current) setCheck({ state: "ok", diagnostics: [], canonical: r.content, for: content });
      return r.content;
    } catch (e) {
      if (n !== seq.current) return null;
      const d = e.details && e.details.diagnostics;
      if (e.status === 400 && Array.isArray(d)) setCheck({ state: "errors", diagnostics: d, canonical: null, for: content });
      else setCheck({ state: "failed", diagnostics: [], canonical: null, for: content, error: e });
      return null;
    }
  };

  useEffect(() => {
    if (readOnly) return undefined;
    setCheck((c) => ({ ...c, state: c.state === "off" ? "off" : "checking" }));
    const t = setTimeout(() => canonicalize(text), 400);
    return () => clearTimeout(t);
  }, [text]);

  // focus the editor when it opens (after the dialog moved focus in)
  useEffect(() => { const t = setTimeout(() => ref.current && ref.current.focus(), 0); return () => clearTimeout(t); }, []);

  const lines = text.split("\n");
  const bad = new Set(check.diagnostics.map((d) => d.line));
  const dirty = text !== initial;

  const track = (el) => {
    const before = el.value.slice(0, el.selectionStart);
    const ls = before.split("\n");
    setCaret({ line: ls.length, col: ls[ls.length - 1].length + 1 });
  };
  const goTo = (line) => {
    const el = ref.current;
    if (!el) return;
    const ls = el.value.split("\n");
    const n = Math.max(1, Math.min(line, ls.length));
    let pos = 0;
    for (let i = 0; i < n - 1; i++) pos += ls[i].length + 1;
    el.focus();
    el.setSelectionRange(pos, pos);
    el.scrollTop = Math.max(0, (n - 4) * LINE_H);
    if (gutter.current) gutter.current.scrollTop = el.scrollTop;
    setCaret({ line: n, col: 1 });
  };
  const format = async () => {
    const c = check.for === text && check.canonical !== null ? check.canonical : await canonicalize(text);
    if (c !== null && c !== undefined) { setText(c); toast("Formatted as canonical markdown.", "info"); }
  };
  const close = async () => {
    if (finished.current) return;
    if (!readOnly && dirty && !(await confirm({ title: "Discard your changes?", message: "The routine's markdown has unsaved changes.", confirmLabel: "Discard", danger: true }))) return;
    finished.current = true;
    onClose();
  };
  const save = async (e) => {
    e.preventDefault();
    setSaving(true);
    setSaveError(null);
    try {
      const body = { grammarVersion: 1, content: text };
      const r = routine
        ? await put(`/agents/${agent.id}/routines/${routine.id}/portable`, body)
        : await post(`/agents/${agent.id}/routines/portable`, body);
      finished.current = true;
      toast(routine ? "Routine saved to the draft. Publish it to put it live." : "Routine added to the draft. Publish it to put it live.");
      onSaved(r.routineId || (routine && routine.id));
    } catch (err) {
      setSaveError({ error: err, text });
      const d = err.details && err.details.diagnostics;
      if (err.status === 400 && Array.isArray(d)) setCheck({ state: "errors", diagnostics: d, canonical: null, for: text });
    } finally { setSaving(false); }
  };

  const refused = saveError && saveError.error;
  const findings = refused && refused.code === "routine_invalid" && refused.details && refused.details.validation
    ? refused.details.validation.diagnostics || [] : null;
  const outdated = saveError && saveError.text !== text;
  const canFormat = !readOnly && check.state === "ok" && check.for === text && check.canonical !== null && check.canonical !== text;

  return html`<${Modal} open wide title=${readOnly ? `“${routine.name}” (read-only)` : routine ? `Edit routine: ${routine.name}` : "New routine"} onClose=${close} testid="routine-editor">
    <form class="rt-editor" onSubmit=${save} novalidate>
      <p class="hint">Portable markdown: front matter (<code>name</code>, <code>trigger</code>, <code>vars</code>…), then one step per line or per <code># Heading</code>; <code>@slot</code> collects a value, <code>#skill</code> calls a skill, <code>${"-> step:id"}</code>, <code>${"-> end"}</code> and <code>${"-> handoff"}</code> branch.</p>
      <div class="rt-editor-grid">
        <div class="rt-code-wrap">
          <label for=${id} class="label-like">Routine markdown</label>
          <div class="rt-code-box">
            <div class="rt-gutter" ref=${gutter} aria-hidden="true">${lines.map((_, i) => html`<div class=${"rt-ln" + (bad.has(i + 1) ? " rt-ln-bad" : "") + (caret.line === i + 1 ? " rt-ln-cur" : "")}>${i + 1}</div>`)}</div>
            <textarea id=${id} ref=${ref} class="rt-code" value=${text} wrap="off" spellcheck="false" autocapitalize="off" autocomplete="off"
              readonly=${readOnly} data-testid="routine-markdown" aria-describedby=${id + "-status"}
              aria-invalid=${check.state === "errors" ? "true" : undefined}
              onInput=${(e) => { setText(e.currentTarget.value); track(e.currentTarget); }}
              onKeyUp=${(e) => track(e.currentTarget)} onClick=${(e) => track(e.currentTarget)}
              onScroll=${(e) => { if (gutter.current) gutter.current.scrollTop = e.currentTarget.scrollTop; }}></textarea>
          </div>
          <p class="hint rt-caret" aria-hidden="true">Line ${caret.line}, column ${caret.col} · ${lines.length} lines</p>
        </div>
        <div class="rt-side">
          <h3 class="rt-side-title">Problems</h3>
          <p id=${id + "-status"} class=${"rt-check rt-check-" + check.state} role="status" data-testid="routine-check" data-state=${check.state}>
            ${check.state === "off" ? "Read-only: you can read this routine but not change it."
              : check.state === "checking" ? "Checking…"
              : check.state === "ok" ? (check.canonical === text ? "No grammar problems; the text is canonical." : "No grammar problems. Format would tidy the text.")
              : check.state === "errors" ? `${check.diagnostics.length} grammar problem${check.diagnostics.length === 1 ? "" : "s"}`
              : `Could not check: ${check.error ? check.error.message : "unknown error"}`}
          </p>
          ${check.diagnostics.length > 0 && html`<ul class="rt-diags" data-testid="routine-diagnostics">
            ${check.diagnostics.map((d) => html`<li><button type="button" class="rt-diag" data-testid="routine-diagnostic" data-line=${d.line} data-code=${d.code}
              onClick=${() => goTo(d.line)}><span class="rt-diag-line">Line ${d.line}</span> — <code>${d.code}</code> — ${d.message}</button></li>`)}
          </ul>`}
          ${!readOnly && check.state === "ok" && html`<p class="hint">Saving also checks the routine as a whole: targets, slots, skills, loops and approvals.</p>`}
          ${findings && html`<div class="alert alert-error" role="alert" data-testid="routine-validation">
            <p><strong>The server refused the routine.</strong> ${findings.length} finding${findings.length === 1 ? "" : "s"}${outdated ? " (for the text you saved; save again to check your changes)" : ""}:</p>
            <ul class="rt-findings">${findings.map((f) => {
              const line = lineOfLocation(text, f.location);
              return html`<li data-testid="routine-finding" data-code=${f.code}>
                <code>${f.code}</code> at <code>${f.location}</code> — ${f.message}
                ${line && html` <button type="button" class="link" onClick=${() => goTo(line)}>go to line ${line}</button>`}
              </li>`;
            })}</ul>
          </div>`}
          ${refused && !findings && html`<${SaveProblem} error=${refused} />`}
        </div>
      </div>
      <div class="form-actions">
        ${!readOnly && dirty && html`<span class="muted small rt-unsaved">Unsaved changes</span>`}
        <${Button} onClick=${close} testid="routine-cancel">${readOnly ? "Close" : "Cancel"}</${Button}>
        ${!readOnly && html`<${Button} onClick=${format} disabled=${!canFormat} testid="routine-format"
          title=${canFormat ? "Replace the text with its canonical form" : "Available when the text has no problems and is not canonical yet"}>Format</${Button}>
          <${Button} type="submit" variant="primary" busy=${saving} testid="routine-save">${routine ? "Save to draft" : "Add to draft"}</${Button}>`}
      </div>
    </form>
  </${Modal}>`;
}

function SaveProblem({ error }) {
  if (error.status === 409) {
    return html`<div class="alert alert-error" role="alert" data-testid="routine-conflict">
      <p><strong>A routine with this name and version already exists.</strong> ${error.message}.</p>
      <p class="small">Change the <code>name:</code> line, or close this and edit the existing routine.</p>
    </div>`;
  }
  if (error.status === 400 && error.details && error.details.diagnostics) {
    return html`<div class="alert alert-error" role="alert" data-testid="routine-save-error">Fix the grammar problems listed above, then save again.</div>`;
  }
  return html`<div data-testid="routine-save-error"><${ErrorBox} error=${error} /></div>`;
}
