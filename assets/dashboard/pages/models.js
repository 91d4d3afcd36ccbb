// Models & providers: provider credentials (write-only; explained when encryption is not
// configured) and the model preference of each slot with what it resolves to now.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, put } from "../api.js";
import { can } from "../session.js";
import { Badge, Button, Card, ErrorBox, FormError, Input, Loading, PageHeader, Select, Table, confirm, fmtDate, html, toast, useAsync, useForm } from "../ui.js";

const PROVIDERS = ["openai", "openai-compatible", "claude", "gemini"];
const SLOTS = [["chat", "Chat (answers, enrichment, directive matching)"], ["rewrite", "Rewrite (query rewrite, search planning)"], ["rerank", "Rerank"]];

export default function Models() {
  return html`<div class="page">
    <${PageHeader} title="Models & providers" subtitle="Which model does what. With nothing configured, Steward answers with its built-in extractive answerer: it quotes your documents and needs no model." />
    <${Credentials} />
    <${Preferences} />
  </div>`;
}

function Credentials() {
  const manage = can("workspace.settings.manage");
  const res = useAsync(() => get("/settings/credentials"), []);
  const f = useForm({ provider: "openai", apiKey: "" });
  const save = f.submit(async (v) => {
    await put("/settings/credentials/" + v.provider, { apiKey: v.apiKey.trim() });
    f.set("apiKey", "");
    toast("Key stored. It cannot be read back.");
    res.reload();
  });
  const remove = async (p) => {
    if (!(await confirm({ title: "Remove key?", message: `The ${p} key of this workspace is deleted.`, confirmLabel: "Remove", danger: true }))) return;
    try { await del("/settings/credentials/" + p); toast("Key removed."); res.reload(); } catch (e) { toast(e.message, "error"); }
  };
  const d = res.data;
  return html`<${Card} title="Provider keys" testid="credentials">
    <${ErrorBox} error=${res.error} retry=${res.reload} />
    ${!d ? html`<${Loading} />` : html`
      ${!d.encryptionConfigured && html`<div class="alert alert-warn" data-testid="encryption-missing"><strong>Keys cannot be stored yet.</strong>
        The server has no <code>CONNECTOR_ENCRYPTION_KEY</code>, so it cannot seal secrets. Set it (64 hex characters, e.g. <code>openssl rand -hex 32</code>) in the server's environment and restart.
        Keys given to the server as environment variables still work.</div>`}
      <${Table} caption="Providers" rowKey=${(p) => p} rows=${PROVIDERS} columns=${[
        { label: "Provider", render: (p) => html`<strong>${p}</strong>` },
        { label: "Workspace key", render: (p) => { const c = d.credentials.find((x) => x.provider === p); return c ? html`<${Badge} tone="green">stored</${Badge}> <span class="muted small">${fmtDate(c.updatedAt)}</span>` : html`<span class="muted">none</span>`; } },
        { label: "Server environment", render: (p) => (d.envProviderAvailability[p] ? html`<${Badge} tone="green">available</${Badge}>` : html`<span class="muted">not set</span>`) },
        manage && { label: "", render: (p) => d.credentials.some((x) => x.provider === p) && html`<${Button} small variant="danger" onClick=${() => remove(p)}>Remove</${Button}>` },
      ].filter(Boolean)} />
      ${manage && html`<form onSubmit=${save} novalidate class="mt">
        <h3>Store a key</h3>
        <${FormError} error=${f.error} fields=${["apiKey"]} />
        <div class="row align-end">
          <${Select} form=${f} name="provider" label="Provider" options=${PROVIDERS} className="field-inline" />
          <${Input} form=${f} name="apiKey" label="API key" type="password" autocomplete="off" className="grow field-inline" testid="credential-key" />
          <${Button} type="submit" variant="primary" busy=${f.busy} disabled=${!f.values.apiKey.trim()}>Store key</${Button}>
        </div>
        <p class="hint">Write-only: a stored key is never shown again.</p>
      </form>`}`}
  </${Card}>`;
}

function Preferences() {
  const manage = can("workspace.settings.manage");
  const res = useAsync(() => get("/settings/llm-models"), []);
  const [known, setKnown] = useState({});
  const d = res.data;
  return html`<${Card} title="Model per slot" testid="model-preferences">
    <${ErrorBox} error=${res.error} retry=${res.reload} />
    ${!d ? html`<${Loading} />` : html`<div class="stack">${SLOTS.map(([slot, label]) => html`<${Slot} key=${slot + JSON.stringify(d[slot])} slot=${slot} label=${label}
      pref=${d[slot]} effective=${d.effective && d.effective[slot]} manage=${manage} known=${known}
      onSaved=${(r) => { if (r && r.knownModelsByProvider) setKnown(r.knownModelsByProvider); res.reload(); }} />`)}</div>`}
  </${Card}>`;
}

function Slot({ slot, label, pref, effective, manage, known, onSaved }) {
  const f = useForm({ provider: pref ? pref.provider : "", model: pref ? pref.model || "" : "" });
  const save = f.submit(async (v) => {
    const r = await put("/settings/llm-models", { [slot]: v.provider ? { provider: v.provider, model: v.model.trim() || undefined } : null });
    toast(`${slot} model saved.`);
    onSaved(r);
  });
  const listId = `known-${slot}`;
  return html`<form onSubmit=${save} novalidate class="slot">
    <h3>${label}</h3>
    <p class="muted small" data-testid=${"effective-" + slot}>Now: <strong>${effective ? `${effective.provider} · ${effective.model}` : "—"}</strong>${effective ? ` (from ${effective.source})` : ""}</p>
    <${FormError} error=${f.error} fields=${[slot, "provider", "model"]} />
    <div class="row align-end">
      <${Select} form=${f} name="provider" label="Provider" errorField=${slot + ".provider"} className="field-inline" disabled=${!manage}
        options=${[["", "Inherit (server default)"], ...PROVIDERS.map((p) => [p, p]), ["local", "local (GGUF)"], ["builtin", "builtin"]]} />
      ${f.values.provider && html`<${Input} form=${f} name="model" label="Model" errorField=${slot + ".model"} className="grow field-inline" list=${listId} disabled=${!manage} />
        <datalist id=${listId}>${(known[f.values.provider] || []).map((m) => html`<option value=${m} />`)}</datalist>`}
      ${manage && html`<${Button} type="submit" busy=${f.busy}>Save</${Button}>`}
    </div>
    ${f.error && f.error.details && f.error.details.code === "provider_unavailable" && html`<p class="hint">Store a key for this provider above (or set it in the server environment) first.</p>`}
  </form>`;
}
