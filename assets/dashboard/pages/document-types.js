// Document types: the catalog enrichment classifies documents into. Built-in types can be
// disabled; operator types (with fields) are edited here and saved together against the
// catalog's revision (a stale revision is a 409: reload and reapply).

import { useState } from "../../vendor/hooks.mjs";
import { get, put } from "../api.js";
import { can } from "../session.js";
import { Badge, Button, Card, Checkbox, ErrorBox, FormError, Input, Loading, PageHeader, Select, TextArea, fieldError, html, toast, useAsync } from "../ui.js";

const VALUE_TYPES = ["string", "number", "date", "boolean", "string_list"];

export default function DocumentTypes() {
  const res = useAsync(() => get("/settings/document-types"), []);
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!res.data) return html`<${Loading} />`;
  return html`<${Editor} key=${res.data.revision} catalog=${res.data} reload=${res.reload} />`;
}

function Editor({ catalog, reload }) {
  const manage = can("workspace.settings.manage");
  const builtIn = catalog.types.filter((t) => t.origin === "built_in");
  const [types, setTypes] = useState(catalog.types.filter((t) => t.origin !== "built_in").map((t) => ({ ...t, fields: t.fields || [] })));
  const [disabled, setDisabled] = useState(builtIn.filter((t) => !t.enabled).map((t) => t.key));
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const pathErr = (path) => (error && error.details && typeof error.details.path === "string" && (error.details.path === path || error.details.path.startsWith(path + ".")) ? error.message : null);

  const setType = (i, patch) => setTypes((ts) => ts.map((t, j) => (j === i ? { ...t, ...patch } : t)));
  const setField = (i, k, patch) => setType(i, { fields: types[i].fields.map((f, j) => (j === k ? { ...f, ...patch } : f)) });

  const save = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = {
        expectedRevision: catalog.revision,
        types: types.map((t) => ({ key: t.key, label: t.label, description: t.description || "", payload: t.payload || "none",
          fields: t.fields.map((f) => ({ key: f.key, label: f.label, valueType: f.valueType, instruction: f.instruction || "" })) })),
        disabledBuiltInTypeKeys: disabled,
      };
      await put("/settings/document-types", body);
      toast("Document types saved.");
      reload();
    } catch (err) { setError(err); } finally { setBusy(false); }
  };

  return html`<div class="page">
    <${PageHeader} title="Document types" subtitle="Enrichment classifies each document into one of these types and extracts the fields it declares (for example dates you can filter searches by)." />
    <form onSubmit=${save} novalidate class="stack">
      ${error && error.code === "revision_conflict" ? html`<div class="alert alert-warn" role="alert" data-testid="doctypes-conflict">
          <strong>Someone else saved the catalog meanwhile</strong> (now revision ${error.details && error.details.currentRevision}). Your edits were not saved.
          <${Button} small onClick=${reload}>Load the latest and start again</${Button}></div>`
        : error && error.details && error.details.limit ? html`<div class="alert alert-error" role="alert" data-testid="doctypes-limit">
          <strong>Limit reached (${error.details.limit}).</strong> ${error.message}</div>`
        : html`<${FormError} error=${error} />`}
      <${Card} title="Built-in types">
        ${builtIn.map((t) => html`<${Checkbox} name=${"bi-" + t.key} label=${`${t.label} — ${t.description}`} disabled=${!manage || !t.disableable}
          checked=${!disabled.includes(t.key)} onChange=${(on) => setDisabled((d) => (on ? d.filter((k) => k !== t.key) : [...d, t.key]))}
          hint=${t.disableable ? (t.fields.length ? "Fields: " + t.fields.map((f) => f.key).join(", ") : "") : "Always on."} />`)}
      </${Card}>
      <${Card} title="Your types" actions=${manage && html`<${Button} small onClick=${() => setTypes((ts) => [...ts, { key: "", label: "", description: "", payload: "none", fields: [] }])} testid="doctype-add">Add type</${Button}>`}>
        ${types.length === 0 && html`<p class="muted">No custom types. Add one for documents your workspace has a lot of (menus, contracts, job offers…).</p>`}
        ${types.map((t, i) => html`<fieldset data-testid="doctype">
          <legend>${t.label || "New type"}</legend>
          <div class="form-grid">
            <${Input} label="Key" name=${"key" + i} value=${t.key} disabled=${!manage} error=${pathErr(`types[${i}].key`) || pathErr(`types.${i}.key`)} onInput=${(e) => setType(i, { key: e.currentTarget.value })} />
            <${Input} label="Label" name=${"label" + i} value=${t.label} disabled=${!manage} error=${pathErr(`types[${i}].label`) || pathErr(`types.${i}.label`)} onInput=${(e) => setType(i, { label: e.currentTarget.value })} />
            <${Select} label="Payload" name=${"payload" + i} value=${t.payload || "none"} disabled=${!manage} options=${["none", "facts"]} onChange=${(e) => setType(i, { payload: e.currentTarget.value })} />
          </div>
          <${TextArea} label="Description" name=${"desc" + i} rows="2" value=${t.description} disabled=${!manage} error=${pathErr(`types[${i}].description`) || pathErr(`types.${i}.description`)} onInput=${(e) => setType(i, { description: e.currentTarget.value })} />
          ${t.fields.map((fl, k) => html`<div class="form-grid field-row">
            <${Input} label="Field key" name=${`fk${i}-${k}`} value=${fl.key} disabled=${!manage} error=${pathErr(`types[${i}].fields[${k}].key`) || pathErr(`types.${i}.fields.${k}.key`)} onInput=${(e) => setField(i, k, { key: e.currentTarget.value })} />
            <${Input} label="Field label" name=${`fl${i}-${k}`} value=${fl.label} disabled=${!manage} onInput=${(e) => setField(i, k, { label: e.currentTarget.value })} />
            <${Select} label="Value type" name=${`fv${i}-${k}`} value=${fl.valueType} disabled=${!manage} options=${VALUE_TYPES} onChange=${(e) => setField(i, k, { valueType: e.currentTarget.value })} />
            <${Input} label="Instruction" name=${`fi${i}-${k}`} value=${fl.instruction} disabled=${!manage} error=${pathErr(`types[${i}].fields[${k}].instruction`) || pathErr(`types.${i}.fields.${k}.instruction`)} onInput=${(e) => setField(i, k, { instruction: e.currentTarget.value })} />
          </div>`)}
          ${manage && html`<div class="row">
            <${Button} small onClick=${() => setType(i, { fields: [...t.fields, { key: "", label: "", valueType: "string", instruction: "" }] })}>Add field</${Button}>
            ${t.fields.length > 0 && html`<${Button} small variant="ghost" onClick=${() => setType(i, { fields: t.fields.slice(0, -1) })}>Remove last field</${Button}>`}
            <${Button} small variant="danger" onClick=${() => setTypes((ts) => ts.filter((_, j) => j !== i))}>Remove type</${Button}>
          </div>`}
        </fieldset>`)}
      </${Card}>
      ${catalog.retiredFields && catalog.retiredFields.length > 0 && html`<${Card} title="Retired fields"><p class="muted">${catalog.retiredFields.map((f) => f.key || JSON.stringify(f)).join(", ")}</p></${Card}>`}
      ${manage && html`<div class="form-actions"><span class="muted">Catalog revision ${catalog.revision}</span>
        <${Button} type="submit" variant="primary" busy=${busy} testid="doctypes-save">Save types</${Button}></div>`}
    </form>
  </div>`;
}
