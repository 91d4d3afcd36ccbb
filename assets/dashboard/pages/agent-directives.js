// Directives: the list (chips shown as bound or unknown), the binding order, and an editor where
// `#skill` chips autocomplete from the agent's skills and the binding rule's result is shown live.

import { useRef, useState } from "../../vendor/hooks.mjs";
import { del, get, patch, post } from "../api.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Checkbox, Empty, ErrorBox, FormError, Input, Loading, Modal, Select, TextArea, confirm, fieldError, html, toast,
  useAsync, useForm, useId,
} from "../ui.js";

export const COVERAGE = ["answered", "partial", "unanswered", "unclear"];
export const REASONS = {
  answered: ["sufficient_evidence"],
  partial: ["insufficient_evidence", "conflicting_evidence", "intentional_scope_boundary"],
  unanswered: ["insufficient_evidence", "conflicting_evidence", "intentional_scope_boundary"],
  unclear: ["ambiguous_request"],
};
const ALL_REASONS = ["sufficient_evidence", "insufficient_evidence", "conflicting_evidence", "intentional_scope_boundary", "ambiguous_request"];

/** Why a skill cannot be bound by a chip, or null when it can. */
export function bindProblem(skill) {
  if (!skill) return "no skill with this name on the agent";
  if (!skill.enabled) return "the skill is disabled";
  if (skill.invocationMode !== "agent_selectable") return `its invocation mode is ${skill.invocationMode}, not agent_selectable`;
  if (skill.capability !== "retrieve" && skill.capability !== "mcp_tool") return `a ${skill.capability} skill cannot be bound (only retrieve and mcp_tool)`;
  return null;
}

/** The `#name` chips of an action: [{name, start, end}] (trailing . , ; : ! ? are prose). */
export function parseChips(text) {
  const out = [];
  const re = /(^|[^A-Za-z0-9_.-])#([A-Za-z][A-Za-z0-9_.-]*)/g;
  let m;
  while ((m = re.exec(text))) {
    let name = m[2];
    while (/[.,;:!?]$/.test(name)) name = name.slice(0, -1);
    const start = m.index + m[1].length;
    out.push({ name: name.toLowerCase(), start, end: start + 1 + name.length });
  }
  return out;
}

function ActionText({ d }) {
  // The stored action with its chips marked (from the API's `chips`).
  const chips = (d.chips || []).slice().sort((a, b) => a.start - b.start);
  const t = d.action || "";
  const parts = [];
  let last = 0;
  for (const c of chips) {
    // `start`/`end` count characters; JS strings index UTF-16 units: map through Array.from.
    const chars = Array.from(t);
    const before = chars.slice(last, c.start).join("");
    parts.push(before);
    parts.push(html`<span class=${"chip " + (c.status === "bound" ? "chip-ok" : "chip-bad")} title=${c.status === "bound" ? "bound skill" : "unknown skill"}
      data-testid="directive-chip" data-status=${c.status}>${chars.slice(c.start, c.end).join("")}${c.status !== "bound" ? " (unknown skill)" : ""}</span>`);
    last = c.end;
  }
  parts.push(Array.from(t).slice(last).join(""));
  return html`<p class="directive-action">${parts}</p>`;
}

export default function Directives({ agent, onChanged }) {
  const manage = can("workspace.agents.manage");
  const res = useAsync(() => Promise.all([get(`/agents/${agent.id}/directives`), get(`/agents/${agent.id}/skills`)]), [agent.id]);
  const [editing, setEditing] = useState(null);
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!res.data) return html`<${Loading} />`;
  const directives = res.data[0].directives || [];
  const skills = res.data[1].skills || [];
  const done = () => { setEditing(null); res.reload(); onChanged(); };

  const toggle = async (d) => {
    try { await patch(`/agents/${agent.id}/directives/${d.id}`, { enabled: !d.enabled }); done(); } catch (e) { toast(e.message, "error"); }
  };
  const remove = async (d) => {
    if (!(await confirm({ title: "Delete directive?", message: `“${d.name}” will be removed from the draft.`, confirmLabel: "Delete", danger: true }))) return;
    try { await del(`/agents/${agent.id}/directives/${d.id}`); toast("Directive deleted."); done(); } catch (e) { toast(e.message, "error"); }
  };

  const bound = directives.filter((d) => d.binding && d.enabled)
    .sort((a, b) => (b.priority ?? 50) - (a.priority ?? 50) || a.name.localeCompare(b.name));

  return html`<div class="stack">
    <${Card} title="Directives" actions=${manage && html`<${Button} variant="primary" onClick=${() => setEditing("new")} testid="directive-new">New directive</${Button}>`}>
      <p class="muted">A directive says what to do when a condition holds. Put <code>#skill_name</code> in its action to bind one of the agent's skills.</p>
      ${directives.length ? html`<ul class="list">${directives.map((d) => html`<li class="directive" data-testid="directive-row">
        <div class="directive-head">
          <strong>${d.name}</strong>
          ${!d.enabled && html`<${Badge} tone="gray">disabled</${Badge}>`}
          <${Badge} tone="blue">${d.condition.kind === "always" ? "always" : "contextual"}</${Badge}>
          <span class="muted small">priority ${d.priority ?? "50 (default)"}</span>
          ${d.binding && html`<span class="small">binds <code>#${d.binding.skillName}</code></span>`}
          <span class="spacer"></span>
          ${manage && html`<${Button} small onClick=${() => setEditing(d)} testid="directive-edit">Edit</${Button}>
            <${Button} small onClick=${() => toggle(d)}>${d.enabled ? "Disable" : "Enable"}</${Button}>
            <${Button} small variant="danger" onClick=${() => remove(d)}>Delete</${Button}>`}
        </div>
        ${d.condition.kind === "contextual" && html`<p class="muted small">When: ${d.condition.description}</p>`}
        <${ActionText} d=${d} />
        ${d.coverageCriteria && html`<p class="small">Coverage: ${d.coverageCriteria.coverage.join(", ")}${d.coverageCriteria.reasons && d.coverageCriteria.reasons.length ? ` (${d.coverageCriteria.reasons.join(", ")})` : ""}</p>`}
        ${d.tags && d.tags.length ? html`<div class="chip-row">${d.tags.map((t) => html`<${Badge} tone="gray">${t}</${Badge}>`)}</div>` : ""}
      </li>`)}</ul>`
      : html`<${Empty} title="No directives yet">Directives steer answers: “When asked about returns, use #returns_lookup and mention the 30-day window.”</${Empty}>`}
    </${Card}>
    ${bound.length > 0 && html`<${Card} title="Binding order">
      <p class="muted">When several directives with a skill match one message, one skill wins: the higher priority (none = 50), then the higher match confidence, then the name. For directives matching with equal confidence:</p>
      <ol>${bound.map((d, i) => html`<li>${d.name} → <code>#${d.binding.skillName}</code> <span class="muted">(priority ${d.priority ?? 50})</span>
        ${i === 0 && html` <${Badge} tone="green">wins</${Badge}>`}
        ${(d.chips || []).some((c) => c.status !== "bound") && html` <${Badge} tone="red">skipped: skill missing</${Badge}>`}</li>`)}</ol>
    </${Card}>`}
    ${editing && html`<${DirectiveEditor} agent=${agent} skills=${skills} directive=${editing === "new" ? null : editing}
      onClose=${() => setEditing(null)} onSaved=${done} />`}
  </div>`;
}

function initial(d) {
  return {
    name: d ? d.name : "",
    kind: d ? d.condition.kind : "contextual",
    description: d && d.condition.description ? d.condition.description : "",
    action: d ? d.action : "",
    priority: d && d.priority !== null && d.priority !== undefined ? String(d.priority) : "",
    binding: d && d.binding ? d.binding.skillName : "",
    coverage: (d && d.coverageCriteria && d.coverageCriteria.coverage) || [],
    reasons: (d && d.coverageCriteria && d.coverageCriteria.reasons) || [],
    tags: d && d.tags ? d.tags.join(", ") : "",
    notes: d && d.description ? d.description : "",
    enabled: d ? d.enabled : true,
    surfaces: (d && d.surfaces) || [],
  };
}

function DirectiveEditor({ agent, skills, directive, onClose, onSaved }) {
  const f = useForm(initial(directive));
  const v = f.values;
  const [prompt, setPrompt] = useState("");
  const [drafting, setDrafting] = useState(false);
  const chips = parseChips(v.action);
  const chipNames = [...new Set(chips.map((c) => c.name))];
  // The binding follows the chip: one chip → bind it; several → the operator picks.
  const binding = chipNames.includes(v.binding) ? v.binding : chipNames.length === 1 ? chipNames[0] : "";
  const boundSkill = skills.find((s) => s.name === binding);
  const problem = binding ? bindProblem(boundSkill) : null;

  const save = f.submit(async () => {
    const body = {
      name: v.name.trim(),
      condition: v.kind === "always" ? { kind: "always" } : { kind: "contextual", description: v.description },
      action: v.action,
      priority: v.priority === "" ? null : Number(v.priority),
      binding: binding ? { kind: "skill", skillName: binding } : null,
      coverageCriteria: v.coverage.length ? { coverage: v.coverage, ...(v.reasons.length ? { reasons: v.reasons } : {}) } : null,
      tags: v.tags.split(",").map((t) => t.trim()).filter(Boolean),
      description: v.notes.trim() || null,
      enabled: v.enabled,
      surfaces: v.surfaces,
    };
    if (directive) await patch(`/agents/${agent.id}/directives/${directive.id}`, body);
    else await post(`/agents/${agent.id}/directives`, body);
    toast(directive ? "Directive saved to the draft." : "Directive added to the draft.");
    onSaved();
  });

  const draft = async () => {
    setDrafting(true);
    try {
      const r = await post(`/agents/${agent.id}/directives/draft`, { prompt });
      const d = r.draft || {};
      f.setValues((s) => ({
        ...s,
        name: d.name || s.name,
        kind: d.condition ? d.condition.kind : s.kind,
        description: (d.condition && d.condition.description) || s.description,
        action: d.action || s.action,
        priority: d.priority !== null && d.priority !== undefined ? String(d.priority) : s.priority,
      }));
      toast(`Draft written by ${r.generatedBy || "a template"}; review it before saving.`, "info");
    } catch (e) { toast(e.message, "error"); } finally { setDrafting(false); }
  };

  const toggleIn = (key, val, on) => f.set(key, on ? [...v[key], val] : v[key].filter((x) => x !== val));
  const legalReasons = new Set(v.coverage.flatMap((c) => REASONS[c]));
  const actionError = fieldError(f.error, "action") || fieldError(f.error, "binding");

  return html`<${Modal} open wide title=${directive ? "Edit directive" : "New directive"} onClose=${onClose} testid="directive-dialog">
    ${!directive && html`<div class="row align-end draft-row">
      <${Input} label="Describe it in your words (optional)" name="prompt" value=${prompt} onInput=${(e) => setPrompt(e.currentTarget.value)} className="grow field-inline"
        placeholder="When people ask about refunds, point them to the returns policy" />
      <${Button} onClick=${draft} busy=${drafting} disabled=${!prompt.trim()}>Draft it</${Button}>
    </div>`}
    <form onSubmit=${save} novalidate>
      <${FormError} error=${f.error} fields=${["name", "condition", "action", "binding", "priority", "coverageCriteria", "tags", "description"]} />
      <div class="form-grid">
        <${Input} form=${f} name="name" label="Name" required testid="directive-name" />
        <${Input} form=${f} name="priority" label="Priority (0–100, empty = 50)" type="number" min="0" max="100" testid="directive-priority" />
      </div>
      <${Select} form=${f} name="kind" label="Applies" errorField="condition.kind" testid="directive-kind"
        options=${[["contextual", "When a condition holds (contextual)"], ["always", "Always"]]} />
      ${v.kind === "contextual" && html`<${TextArea} form=${f} name="description" label="Condition" rows="2" errorField="condition" testid="directive-condition"
        hint="Judged against each message, e.g. “the visitor asks about returns or refunds”." />`}
      <${ChipEditor} value=${v.action} onInput=${(t) => f.set("action", t)} skills=${skills} error=${actionError} />
      <${BindingResult} chipNames=${chipNames} skills=${skills} binding=${binding} problem=${problem}
        onPick=${(n) => f.set("binding", n)} />
      <fieldset>
        <legend>Coverage criteria (optional)</legend>
        <p class="hint">Apply this directive only when the answer's coverage is one of these.</p>
        <div class="row">${COVERAGE.map((c) => html`<${Checkbox} name=${"cov-" + c} label=${c} checked=${v.coverage.includes(c)}
          onChange=${(on) => { toggleIn("coverage", c, on); if (!on) f.set("reasons", v.reasons.filter((r) => v.coverage.filter((x) => x !== c).some((x) => REASONS[x].includes(r)))); }} />`)}</div>
        ${v.coverage.length > 0 && html`<div class="row">${ALL_REASONS.map((r) => html`<${Checkbox} name=${"reason-" + r} label=${r.replace(/_/g, " ")}
          checked=${v.reasons.includes(r)} disabled=${!legalReasons.has(r)} onChange=${(on) => toggleIn("reasons", r, on)} />`)}</div>`}
        ${fieldError(f.error, "coverageCriteria") && html`<p class="field-error" role="alert">${fieldError(f.error, "coverageCriteria")}</p>`}
      </fieldset>
      <div class="form-grid">
        <${Input} form=${f} name="tags" label="Tags (comma-separated)" hint="routine:<id> and step:… tags keep it to routines." />
        <${Input} form=${f} name="notes" label="Note for operators" errorField="description" />
      </div>
      <div class="row">
        <${Checkbox} form=${f} name="enabled" label="Enabled" />
        <${Checkbox} name="s-answer" label="Steers answers" checked=${v.surfaces.includes("answer")} onChange=${(on) => toggleIn("surfaces", "answer", on)} />
        <${Checkbox} name="s-sugg" label="Steers suggested questions" checked=${v.surfaces.includes("suggested_questions")} onChange=${(on) => toggleIn("surfaces", "suggested_questions", on)} />
      </div>
      <div class="form-actions">
        <${Button} onClick=${onClose}>Cancel</${Button}>
        <${Button} type="submit" variant="primary" busy=${f.busy} testid="directive-save">Save directive</${Button}>
      </div>
    </form>
  </${Modal}>`;
}

function BindingResult({ chipNames, skills, binding, problem, onPick }) {
  if (!chipNames.length) {
    return html`<p class="hint" data-testid="binding-result">No <code>#skill</code> chip: the directive steers the answer without binding a skill.</p>`;
  }
  return html`<div class="binding" data-testid="binding-result" aria-live="polite">
    <div class="chip-row">
      <span class="small">Chips:</span>
      ${chipNames.map((n) => {
        const s = skills.find((x) => x.name === n);
        const p = bindProblem(s);
        return html`<span class=${"chip " + (!s ? "chip-bad" : p ? "chip-warn" : "chip-ok")} data-testid="chip-preview" data-status=${!s ? "unknown_skill" : p ? "not_bindable" : "bindable"}
          title=${p || "bindable"}>#${n}${!s ? " · unknown skill" : p ? " · not bindable" : ""}</span>`;
      })}
    </div>
    ${chipNames.length > 1 && html`<${Select} label="Bind which skill" name="binding" value=${binding} options=${[["", "Choose…"], ...chipNames.map((n) => [n, "#" + n])]}
      onChange=${(e) => onPick(e.currentTarget.value)} className="field-inline" />`}
    <p class=${problem ? "field-error" : "hint ok"}>
      ${!binding ? "Choose which chip binds a skill; the other chips stay prose."
        : problem ? `#${binding} cannot be bound: ${problem}. Saving will be refused.`
        : `Binds #${binding} (${(skills.find((s) => s.name === binding) || {}).capability}): when this directive matches and wins the binding order, the skill runs for the turn.`}
    </p>
  </div>`;
}

/** The action textarea with `#` autocompletion of the agent's skills (keyboard: ↑ ↓ Enter Tab Esc). */
function ChipEditor({ value, onInput, skills, error }) {
  const id = useId("action");
  const listId = id + "-list";
  const ref = useRef(null);
  const [menu, setMenu] = useState(null); // {start, query, active}

  const look = (el) => {
    const pos = el.selectionStart;
    const before = el.value.slice(0, pos);
    const m = /(^|[^A-Za-z0-9_.-])#([A-Za-z0-9_.-]*)$/.exec(before);
    if (!m) { setMenu(null); return; }
    setMenu({ start: pos - m[2].length - 1, query: m[2].toLowerCase(), active: 0 });
  };
  const options = menu ? skills.filter((s) => s.name.startsWith(menu.query)) : [];
  const accept = (s) => {
    const el = ref.current;
    const pos = el.selectionStart;
    const next = value.slice(0, menu.start) + "#" + s.name + " " + value.slice(pos).replace(/^[A-Za-z0-9_.-]*/, "");
    onInput(next);
    setMenu(null);
    const caret = menu.start + s.name.length + 2;
    requestAnimationFrame(() => { el.focus(); el.setSelectionRange(caret, caret); });
  };
  const key = (e) => {
    if (!menu || !options.length) return;
    if (e.key === "ArrowDown") { e.preventDefault(); setMenu({ ...menu, active: (menu.active + 1) % options.length }); }
    else if (e.key === "ArrowUp") { e.preventDefault(); setMenu({ ...menu, active: (menu.active - 1 + options.length) % options.length }); }
    else if (e.key === "Enter" || e.key === "Tab") { e.preventDefault(); accept(options[menu.active]); }
    else if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); setMenu(null); }
  };
  const open = menu && options.length > 0;
  return html`<div class=${"field combo" + (error ? " has-error" : "")}>
    <label for=${id}>Action</label>
    <textarea id=${id} ref=${ref} rows="4" value=${value} data-testid="directive-action"
      aria-autocomplete="list" aria-controls=${open ? listId : undefined}
      aria-activedescendant=${open ? `${listId}-${menu.active}` : undefined}
      aria-describedby=${`${id}-hint${error ? ` ${id}-err` : ""}`} aria-invalid=${error ? "true" : undefined}
      onInput=${(e) => { onInput(e.currentTarget.value); look(e.currentTarget); }}
      onKeyDown=${key} onClick=${(e) => look(e.currentTarget)} onBlur=${() => setTimeout(() => setMenu(null), 150)}></textarea>
    ${open && html`<ul class="listbox" id=${listId} role="listbox" aria-label="Skills" data-testid="chip-suggestions">
      ${options.map((s, i) => {
        const p = bindProblem(s);
        return html`<li id=${`${listId}-${i}`} role="option" aria-selected=${i === menu.active} data-testid="chip-option"
          onMouseDown=${(e) => { e.preventDefault(); accept(s); }}>
          <span class="mono">#${s.name}</span><span class="muted small">${p ? "not bindable" : s.capability}</span></li>`;
      })}
    </ul>`}
    <p class="hint" id=${id + "-hint"}>What the agent should do. Type <code>#</code> to insert one of the agent's skills${skills.length ? ` (${skills.length} available)` : " (this agent has no skills yet — add one under Skills)"}.</p>
    <p class="sr-only" aria-live="polite">${open ? `${options.length} skill suggestions. Use up and down arrows, Enter to insert.` : ""}</p>
    ${error && html`<p class="field-error" id=${id + "-err"} role="alert" data-testid="field-error">${error}</p>`}
  </div>`;
}
