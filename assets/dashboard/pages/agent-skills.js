// Skills: the agent's skills and an editor whose form is generated from the capability registry
// (`/skill-capabilities`): invocation modes, target, availability, inherited retrieval defaults
// and each capability's input schema.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, patch, post } from "../api.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Checkbox, Empty, ErrorBox, FormError, Input, Loading, Modal, Select, Table, TextArea, confirm, fieldError, html, toast,
  useAsync, useForm,
} from "../ui.js";
import { RetrievalConfig } from "./agent-settings.js";

export default function Skills({ agent, onChanged }) {
  const manage = can("workspace.agents.manage");
  const res = useAsync(() => Promise.all([get(`/agents/${agent.id}/skills`), get(`/agents/${agent.id}/skill-capabilities`)]), [agent.id]);
  const [editing, setEditing] = useState(null);
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!res.data) return html`<${Loading} />`;
  const skills = res.data[0].skills || [];
  const caps = res.data[1].capabilities || [];
  const done = () => { setEditing(null); res.reload(); onChanged(); };

  const toggle = async (s) => {
    try { await patch(`/agents/${agent.id}/skills/${s.id}`, { enabled: !s.enabled }); toast(s.enabled ? "Skill disabled." : "Skill enabled."); done(); } catch (e) { toast(e.message, "error"); }
  };
  const [testing, setTesting] = useState(null);
  const remove = async (s) => {
    if (!(await confirm({ title: "Delete skill?", message: `#${s.name} is removed from the draft; directives that bind it show it as an unknown skill, and context variables it resolves are removed.`, confirmLabel: "Delete", danger: true }))) return;
    try { await del(`/agents/${agent.id}/skills/${s.id}`); toast("Skill deleted."); done(); } catch (e) { toast(e.message, "error"); }
  };

  return html`<div class="stack">
    <${Card} title="Skills" actions=${manage && html`<${Button} variant="primary" onClick=${() => setEditing("new")} testid="skill-new">Add skill</${Button}>`}>
      <p class="muted">Skills are what the agent can do in a turn: look things up (retrieve), call tools, send messages. Bind one from a directive with <code>#name</code>.</p>
      <${Table} caption="Skills" rowTestId="skill-row" rows=${skills} columns=${[
        { label: "Name", render: (s) => html`<code>#${s.name}</code>` },
        { label: "Capability", render: (s) => s.capability },
        { label: "Invocation", render: (s) => s.invocationMode.replace(/_/g, " ") },
        { label: "Status", render: (s) => html`<${Badge} tone=${s.enabled ? "green" : "gray"}>${s.enabled ? "enabled" : "disabled"}</${Badge}>` },
        { label: "Config", render: (s) => (Object.keys(s.config || {}).length ? html`<code class="small">${JSON.stringify(s.config)}</code>` : html`<span class="muted">inherited</span>`) },
        manage && { label: "Actions", render: (s) => html`<div class="row">
          <${Button} small onClick=${() => setEditing(s)}>Edit</${Button}>
          <${Button} small onClick=${() => toggle(s)}>${s.enabled ? "Disable" : "Enable"}</${Button}>
          ${DELIVERING.includes(s.capability) && html`<${Button} small onClick=${() => setTesting(s)} testid="skill-test">Send test</${Button}>`}
          <${Button} small variant="danger" onClick=${() => remove(s)}>Delete</${Button}></div>` },
      ].filter(Boolean)}
      empty=${html`<${Empty} title="No skills yet">Add a retrieve skill with its own settings and bind it from a directive, e.g. a lookup limited to your policies.</${Empty}>`} />
    </${Card}>
    <${Card} title="Capabilities">
      <${Table} caption="Capabilities" rowKey=${(c) => c.id} rows=${caps} columns=${[
        { label: "Capability", render: (c) => html`<strong>${c.id}</strong>` },
        { label: "Available", render: (c) => (c.availability.available ? html`<${Badge} tone="green">yes</${Badge}>` : html`<${Badge} tone="gray">no</${Badge}> <span class="muted small">${c.availability.reason}</span>`) },
        { label: "Target", render: (c) => `${c.targetKind}${c.targetRequired ? " (required)" : ""}` },
        { label: "Inputs", render: (c) => inputsOf(c).map((x) => html`<code class="small">${x.name}${x.required ? "*" : ""}: ${x.type}</code> `) },
        { label: "Outcomes", render: (c) => (c.outcomes || []).join(", ") },
      ]} />
    </${Card}>
    ${testing && html`<${SkillTest} agent=${agent} skill=${testing} onClose=${() => setTesting(null)} />`}
    ${editing && html`<${SkillEditor} agent=${agent} caps=${caps} skill=${editing === "new" ? null : editing} onClose=${() => setEditing(null)} onSaved=${done} />`}
  </div>`;
}

function inputsOf(cap) {
  const s = cap.inputSchema && cap.inputSchema.schema;
  if (!s) return cap.inputSchema && cap.inputSchema.source === "discovered" ? [{ name: "(discovered from the tool)", type: "any" }] : [];
  const req = new Set(s.required || []);
  return (s.fields || []).map((f) => ({ ...f, required: req.has(f.name) }));
}

/** A form generated from the capability: invocation modes, target, config (retrieval keys or the input schema). */
function SkillEditor({ agent, caps, skill, onClose, onSaved }) {
  const first = skill ? caps.find((c) => c.id === skill.capability) : caps.find((c) => c.availability.available) || caps[0];
  const f = useForm({
    capability: first ? first.id : "retrieve",
    name: skill ? skill.name : "",
    invocationMode: skill ? skill.invocationMode : first ? first.defaultInvocationMode : "default_answer",
    target: skill && skill.target ? (typeof skill.target === "string" ? skill.target : JSON.stringify(skill.target)) : "",
    enabled: skill ? skill.enabled : true,
    configJson: skill && skill.capability !== "retrieve" ? JSON.stringify(skill.config || {}, null, 2) : "{}",
  });
  const [rc, setRc] = useState(skill && skill.capability === "retrieve" ? skill.config || {} : {});
  const v = f.values;
  const cap = caps.find((c) => c.id === v.capability) || first;
  const isRetrieve = cap && cap.id === "retrieve";

  const chooseCap = (e) => {
    const c = caps.find((x) => x.id === e.currentTarget.value);
    f.setValues((s) => ({ ...s, capability: c.id, invocationMode: c.defaultInvocationMode }));
  };

  const save = f.submit(async () => {
    let config;
    if (isRetrieve) config = rc;
    else {
      try { config = JSON.parse(v.configJson || "{}"); } catch (e) { const err = new Error("Config is not valid JSON: " + e.message); err.field = "config"; throw err; }
    }
    let target = null;
    if (v.target.trim()) {
      try { target = JSON.parse(v.target); } catch { target = v.target.trim(); }
    }
    if (skill) {
      const body = { name: v.name, invocationMode: v.invocationMode, enabled: v.enabled, replaceConfig: config };
      if (!isRetrieve || target !== null) body.target = target;
      await patch(`/agents/${agent.id}/skills/${skill.id}`, body);
    } else {
      const body = { name: v.name, capability: v.capability, invocationMode: v.invocationMode, enabled: v.enabled, config };
      if (target !== null) body.target = target;
      await post(`/agents/${agent.id}/skills`, body);
    }
    toast(skill ? "Skill saved to the draft." : `Skill #${v.name.toLowerCase()} added to the draft.`);
    onSaved();
  });

  const inputs = cap ? inputsOf(cap) : [];
  return html`<${Modal} open wide title=${skill ? `Edit #${skill.name}` : "Add a skill"} onClose=${onClose} testid="skill-dialog">
    <form onSubmit=${save} novalidate>
      <${FormError} error=${f.error} fields=${["name", "capability", "invocationMode", "target", "config", "replaceConfig", "enabled"]} />
      <div class="form-grid">
        <${Select} form=${f} name="capability" label="Capability" onChange=${chooseCap} disabled=${!!skill} testid="skill-capability"
          options=${caps.map((c) => [c.id, c.id + (c.availability.available ? "" : ` — ${c.availability.reason}`)])} />
        <${Input} form=${f} name="name" label="Name" required testid="skill-name" placeholder="e.g. policy_lookup"
          hint="Lowercase letters, digits, _ . - ; starts with a letter. Directives refer to it as #name." />
      </div>
      ${cap && !cap.availability.available && html`<p class="alert alert-warn">${cap.id} is not available yet: ${cap.availability.reason}. The skill can be saved but will not run.</p>`}
      <${Select} form=${f} name="invocationMode" label="Invocation" testid="skill-invocation"
        options=${(cap ? cap.invocationModes : []).map((m) => [m, { default_answer: "Default answer (runs for every answer)", routine_named: "Named in routines", agent_selectable: "Agent-selectable (bindable from a directive chip)" }[m] || m])} />
      ${cap && cap.targetKind !== "source_scope" && html`<${Input} form=${f} name="target" label=${`Target (${cap.targetKind}${cap.targetRequired ? ", required" : ""})`}
        hint="The id of the connection or destination this skill acts on." testid="skill-target" />`}
      <${Checkbox} form=${f} name="enabled" label="Enabled" />
      ${isRetrieve
        ? html`<fieldset><legend>Retrieval settings</legend>
            <p class="hint">Empty fields inherit the agent's retrieval settings and the system defaults.</p>
            <${RetrievalConfig} cap=${cap} value=${rc} onChange=${setRc} error=${f.error} prefix="config" />
          </fieldset>`
        : html`<fieldset><legend>Inputs (from the capability's schema)</legend>
            ${inputs.length ? html`<div class="form-grid">${inputs.map((x) => html`<${Input} label=${`${x.name}${x.required ? " (required)" : ""}`} name=${"in-" + x.name}
              value=${x.type} disabled hint="Supplied when the skill runs (by a routine step or the agent)." />`)}</div>`
              : html`<p class="hint">This capability's inputs are discovered from its connection.</p>`}
            <${TextArea} form=${f} name="configJson" label="Config (JSON)" rows="5" errorField="config" testid="skill-config"
              hint=${cap && cap.id === "mcp_tool" ? "config.toolName is required; config.serverUrl (the MCP server) and config.credential (its bearer token) are sealed and never shown again." : cap && cap.id === "email" ? "mode: draft or send." : cap && cap.id === "notify" ? "delivery.recipientEmails (≤ 5), delivery.webhook.url, exposedInputs {message, email}." : "Capability-specific settings."} />
          </fieldset>`}
      <div class="form-actions">
        <${Button} onClick=${onClose}>Cancel</${Button}>
        <${Button} type="submit" variant="primary" busy=${f.busy} testid="skill-save">${skill ? "Save skill" : "Add skill"}</${Button}>
      </div>
    </form>
  </${Modal}>`;
}

const DELIVERING = ["notify", "webhook_call", "email", "slack_post"];

/** Runs a delivering skill once with test inputs (JSON) and shows the outcome; the delivery itself is in the delivery log. */
function SkillTest({ agent, skill, onClose }) {
  const [inputs, setInputs] = useState(skill.capability === "notify" ? '{"message": "A test notice"}' : skill.capability === "slack_post" ? '{"text": "A test post"}' : "{}");
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const run = async (e) => {
    e.preventDefault();
    setError(null); setResult(null);
    let parsed;
    try { parsed = JSON.parse(inputs || "{}"); } catch { setError(new Error("The inputs are not valid JSON.")); return; }
    setBusy(true);
    try { setResult(await post(`/agents/${agent.id}/skills/${skill.id}/test`, { inputs: parsed })); } catch (err) { setError(err); } finally { setBusy(false); }
  };
  return html`<${Modal} open title=${"Send a test: #" + skill.name} onClose=${onClose} testid="skill-test-dialog">
    <form onSubmit=${run} class="stack" novalidate>
      <${TextArea} label="Inputs (JSON)" name="inputs" rows="4" value=${inputs} onInput=${(e) => setInputs(e.currentTarget.value)}
        hint="The values a routine step would pass; bound values from the skill's configuration are added." testid="skill-test-inputs" />
      ${error && html`<div class="alert alert-error" role="alert">${error.message}</div>`}
      ${result && html`<div class=${"alert " + (["failed", "missing_input", "destination_not_found"].includes(result.outcome) ? "alert-warn" : "alert-info")} role="status" data-testid="skill-test-result">
        Outcome: <strong>${result.outcome}</strong>${result.reason ? " — " + result.reason : ""}${result.missingInputs && result.missingInputs.length ? " · missing: " + result.missingInputs.join(", ") : ""}
        ${result.deliveryIds && result.deliveryIds.length > 0 && html` · queued: <a href="/app/settings/deliveries">follow it in the delivery log</a>`}
      </div>`}
      <div class="row"><${Button} type="submit" variant="primary" busy=${busy} testid="skill-test-send">Send test</${Button}><${Button} onClick=${onClose}>Close</${Button}></div>
    </form>
  </${Modal}>`;
}

