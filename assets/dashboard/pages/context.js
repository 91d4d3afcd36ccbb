// The workspace's context variable catalog and their values by scope. Sensitive values are never
// shown (the API returns them redacted); they can only be replaced or deleted.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, patch, post, put } from "../api.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Empty, ErrorBox, FormError, Input, Loading, Modal, PageHeader, Select, Table, TextArea, confirm, fmtDate, html, toast, useAsync, useForm,
} from "../ui.js";

export default function ContextVariables() {
  const manage = can("workspace.agents.manage");
  const res = useAsync(() => get("/context-variables"), []);
  const [editing, setEditing] = useState(null);
  const [values, setValues] = useState(null);
  const vars = (res.data && res.data.contextVariables) || [];
  const remove = async (v) => {
    if (!(await confirm({ title: "Delete variable?", message: `${v.name}, its values and every agent's use of it are removed.`, confirmLabel: "Delete", danger: true }))) return;
    try { await del("/context-variables/" + v.id); toast("Variable deleted."); res.reload(); } catch (e) { toast(e.message, "error"); }
  };
  return html`<div class="page">
    <${PageHeader} title="Context variables" subtitle="Facts about visitors, customers or the workspace (plan, region, account manager) that agents can use in their instructions as ctx.name."
      actions=${manage && html`<${Button} variant="primary" onClick=${() => setEditing("new")} testid="cv-new">New variable</${Button}>`} />
    <${Card}>
      <${ErrorBox} error=${res.error} retry=${res.reload} />
      ${res.loading && !res.data ? html`<${Loading} />` : html`<${Table} caption="Context variables" rowTestId="cv-row" rows=${vars} columns=${[
        { label: "Name", render: (v) => html`<code>${v.name}</code><div class="muted small">${v.description}</div>` },
        { label: "Type", render: (v) => v.valueType },
        { label: "Trust", render: (v) => v.trustTier },
        { label: "Sensitivity", render: (v) => html`<${Badge} tone=${v.sensitivity === "sensitive" ? "amber" : "gray"}>${v.sensitivity}</${Badge}>` },
        { label: "Default surfacing", render: (v) => v.defaultSurfacing.replace(/_/g, " ") },
        { label: "Actions", render: (v) => html`<div class="row">
          <${Button} small onClick=${() => setValues(v)} testid="cv-values">Values</${Button}>
          ${manage && html`<${Button} small onClick=${() => setEditing(v)}>Edit</${Button}><${Button} small variant="danger" onClick=${() => remove(v)}>Delete</${Button}>`}</div>` },
      ]} empty=${html`<${Empty} title="No context variables">Define one (e.g. <code>plan</code>), enable it on an agent, and push values per session, customer, agent or workspace.</${Empty}>`} />`}
    </${Card}>
    ${values && html`<${Values} v=${values} manage=${manage} onClose=${() => setValues(null)} />`}
    ${editing && html`<${Editor} v=${editing === "new" ? null : editing} onClose=${() => setEditing(null)} onSaved=${() => { setEditing(null); res.reload(); }} />`}
  </div>`;
}

function Editor({ v, onClose, onSaved }) {
  const f = useForm({ name: v ? v.name : "", description: v ? v.description : "", valueType: v ? v.valueType : "string", trustTier: v ? v.trustTier : "unverified",
    sensitivity: v ? v.sensitivity : "normal", defaultSurfacing: v ? v.defaultSurfacing : "on_reference" });
  const save = f.submit(async (x) => {
    if (v) await patch("/context-variables/" + v.id, x); else await post("/context-variables", x);
    toast("Variable saved."); onSaved();
  });
  return html`<${Modal} open title=${v ? "Edit variable" : "New variable"} onClose=${onClose}>
    <form onSubmit=${save} novalidate>
      <${FormError} error=${f.error} fields=${["name", "description", "valueType", "trustTier", "sensitivity", "defaultSurfacing"]} />
      <${Input} form=${f} name="name" label="Name" hint="Lowercase identifier, unique in the workspace." testid="cv-name" />
      <${TextArea} form=${f} name="description" label="Description" rows="2" />
      <div class="form-grid">
        <${Select} form=${f} name="valueType" label="Value type" options=${["string", "json"]} />
        <${Select} form=${f} name="trustTier" label="Trust" options=${["unverified", "signed"]} />
        <${Select} form=${f} name="sensitivity" label="Sensitivity" options=${["normal", "sensitive"]} hint="Sensitive values are sealed at rest and never shown." />
        <${Select} form=${f} name="defaultSurfacing" label="Default surfacing" options=${["always", "on_reference", "operator_only"]} />
      </div>
      <div class="form-actions"><${Button} onClick=${onClose}>Cancel</${Button}><${Button} type="submit" variant="primary" busy=${f.busy} testid="cv-save">Save</${Button}></div>
    </form>
  </${Modal}>`;
}

function Values({ v, manage, onClose }) {
  const res = useAsync(() => get(`/context-variables/${v.id}/values`), [v.id]);
  const f = useForm({ scopeType: "workspace", scopeId: "", value: "" });
  const save = f.submit(async (x) => {
    let data;
    if (v.valueType === "json") {
      try { data = JSON.parse(x.value); } catch (e) { const err = new Error("Not valid JSON: " + e.message); err.field = "data"; throw err; }
    } else data = { value: x.value };
    const scope = { type: x.scopeType };
    if (x.scopeType !== "workspace") scope.id = x.scopeId;
    await put(`/context-variables/${v.id}/values`, { scope, data });
    toast("Value saved."); f.set("value", ""); res.reload();
  });
  const remove = async (val) => {
    try { await del(`/context-variables/${v.id}/values`, { query: { scopeType: val.scope.type, scopeId: val.scope.type === "workspace" ? undefined : val.scope.id } }); toast("Value deleted."); res.reload(); } catch (e) { toast(e.message, "error"); }
  };
  const vals = (res.data && res.data.values) || [];
  return html`<${Modal} open wide title=${"Values of " + v.name} onClose=${onClose} testid="cv-values-dialog">
    <${ErrorBox} error=${res.error} />
    <${Table} caption="Values" rowKey=${(x) => x.scope.type + x.scope.id} rows=${vals} columns=${[
      { label: "Scope", render: (x) => html`${x.scope.type}${x.scope.type !== "workspace" ? html` <code class="small">${x.scope.id}</code>` : ""}` },
      { label: "Value", render: (x) => (x.redacted ? html`<${Badge} tone="amber">hidden (sensitive)</${Badge}>` : html`<code>${x.data && "value" in x.data && Object.keys(x.data).length === 1 ? x.data.value : JSON.stringify(x.data)}</code>`) },
      { label: "Updated", render: (x) => fmtDate(x.updatedAt) },
      manage && { label: "", render: (x) => html`<${Button} small variant="danger" onClick=${() => remove(x)}>Delete</${Button}>` },
    ].filter(Boolean)} empty=${html`<p class="muted">No values stored.</p>`} />
    ${manage && html`<form onSubmit=${save} novalidate class="mt">
      <h3>Set a value</h3>
      <${FormError} error=${f.error} fields=${["scope", "data"]} />
      <div class="form-grid">
        <${Select} form=${f} name="scopeType" label="Scope" options=${["workspace", "agent", "customer", "session"]} errorField="scope.type" />
        ${f.values.scopeType !== "workspace" && html`<${Input} form=${f} name="scopeId" label="Scope id" errorField="scope.id" />`}
      </div>
      <${TextArea} form=${f} name="value" label=${v.valueType === "json" ? "Value (JSON)" : "Value"} rows="2" errorField="data"
        hint=${v.sensitivity === "sensitive" ? "Sealed at rest; it cannot be read back here." : "At most 16 KB."} autocomplete="off" />
      <div class="form-actions"><${Button} type="submit" variant="primary" busy=${f.busy}>Save value</${Button}></div>
    </form>`}
  </${Modal}>`;
}
