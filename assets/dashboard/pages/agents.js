// Agents: the list, creating one, importing one from a bundle, making one the workspace default.

import { useState } from "../../vendor/hooks.mjs";
import { get, post } from "../api.js";
import { navigate } from "../router.js";
import { can } from "../session.js";
import { ImportBundle } from "./agent-bundle.js";
import { Badge, Button, Card, Empty, ErrorBox, FormError, Input, Loading, PageHeader, Table, fmtDate, html, toast, useAsync, useForm } from "../ui.js";

export default function Agents() {
  const manage = can("workspace.agents.manage");
  const res = useAsync(() => get("/agents"), []);
  const agents = (res.data && res.data.agents) || [];
  const f = useForm({ name: "" });
  const [busy, setBusy] = useState(null);

  const create = f.submit(async (v) => {
    const a = await post("/agents", { name: v.name.trim() });
    toast(`Agent “${a.name}” created and published as v1.`);
    navigate(`/app/agents/${a.id}`);
  });
  const makeDefault = async (a) => {
    setBusy(a.id);
    try { await post(`/agents/${a.id}/default`); toast(`“${a.name}” is now the default agent.`); res.reload(); } catch (e) { toast(e.message, "error"); } finally { setBusy(null); }
  };

  return html`<div class="page">
    <${PageHeader} title="Agents" subtitle="Each agent answers from your documents with its own instructions, directives and skills. Visitors always meet its published revision." />
    ${manage && html`<${Card} title="New agent">
      <form onSubmit=${create} novalidate class="row align-end">
        <${Input} form=${f} name="name" label="Name" required testid="agent-name" className="grow field-inline" placeholder="e.g. Support assistant" />
        <${Button} type="submit" variant="primary" busy=${f.busy} testid="agent-create">Create agent</${Button}>
      </form>
      <${FormError} error=${f.error} fields=${["name"]} />
    </${Card}>`}
    ${manage && html`<${ImportBundle} onImported=${() => res.reload()} />`}
    <${Card} title="All agents">
      <${ErrorBox} error=${res.error} retry=${res.reload} />
      ${res.loading && !res.data ? html`<${Loading} />` : html`<${Table} caption="Agents" rowTestId="agent-row" rows=${agents}
        columns=${[
          { label: "Name", render: (a) => html`<div class="row">
            ${a.logo && html`<img class="logo-preview small-logo" src=${a.logo.url} alt="" width="28" height="28" />`}
            <a href=${"/app/agents/" + a.id} data-testid="agent-link">${a.name}</a>
            ${a.isDefault && html`<${Badge} tone="blue" testid="agent-default">default</${Badge}>`}</div>` },
          { label: "Retrieval", render: (a) => (a.retrievalEnabled ? "on" : "off") },
          { label: "Draft", render: (a) => `generation ${a.draftGeneration}` },
          { label: "Updated", render: (a) => fmtDate(a.updatedAt), className: "nowrap" },
          { label: "Actions", render: (a) => html`<div class="row">
            <a class="btn btn-small" href=${"/app/chat?agent=" + a.id}>Test chat</a>
            ${manage && !a.isDefault && html`<${Button} small onClick=${() => makeDefault(a)} busy=${busy === a.id} testid="agent-make-default">Make default</${Button}>`}
          </div>` },
        ]}
        empty=${html`<${Empty} title="No agents">Create an agent above; it starts published with sensible defaults.</${Empty}>`} />`}
    </${Card}>
  </div>`;
}
