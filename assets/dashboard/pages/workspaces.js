// Workspaces: the organization's workspaces; create and rename (organization.workspaces.manage).

import { useState } from "../../vendor/hooks.mjs";
import { get, patch, post } from "../api.js";
import { can, loadSession, switchWorkspace, session } from "../session.js";
import { Badge, Button, Card, ErrorBox, FormError, Input, Loading, PageHeader, Table, fmtDate, html, toast, useAsync, useForm } from "../ui.js";

export default function Workspaces() {
  const manage = can("organization.workspaces.manage");
  const res = useAsync(() => get("/workspaces"), []);
  const f = useForm({ name: "" });
  const [renaming, setRenaming] = useState(null);
  const create = f.submit(async (v) => {
    const r = await post("/workspaces", { name: v.name.trim() });
    toast(`Workspace “${(r.workspace || r).name}” created.`);
    f.set("name", "");
    res.reload();
    loadSession();
  });
  const me = session();
  const items = (res.data && res.data.workspaces) || [];
  return html`<div class="page">
    <${PageHeader} title="Workspaces" subtitle="Each workspace has its own documents, agents and settings. Switch between them in the header." />
    ${manage && html`<${Card} title="New workspace"><form onSubmit=${create} novalidate class="row align-end">
      <${Input} form=${f} name="name" label="Name" className="grow field-inline" testid="workspace-name" />
      <${Button} type="submit" variant="primary" busy=${f.busy} testid="workspace-create">Create</${Button}>
    </form><${FormError} error=${f.error} fields=${["name"]} /></${Card}>`}
    <${Card} title="All workspaces">
      <${ErrorBox} error=${res.error} retry=${res.reload} />
      ${res.loading && !res.data ? html`<${Loading} />` : html`<${Table} caption="Workspaces" rows=${items} columns=${[
        { label: "Name", render: (w) => (renaming === w.id ? html`<${Rename} w=${w} onDone=${() => { setRenaming(null); res.reload(); loadSession(); }} />`
          : html`<strong>${w.name}</strong> ${w.isDefault && html`<${Badge} tone="blue">default</${Badge}>`} ${me && me.workspace && me.workspace.id === w.id && html`<${Badge} tone="green">current</${Badge}>`}`) },
        { label: "Created", render: (w) => fmtDate(w.createdAt) },
        { label: "", render: (w) => html`<div class="row">
          ${!(me && me.workspace && me.workspace.id === w.id) && html`<${Button} small onClick=${() => switchWorkspace(w.id)}>Switch to</${Button}>`}
          ${manage && renaming !== w.id && html`<${Button} small onClick=${() => setRenaming(w.id)}>Rename</${Button}>`}</div>` },
      ]} />`}
    </${Card}>
  </div>`;
}

function Rename({ w, onDone }) {
  const f = useForm({ name: w.name });
  const save = f.submit(async (v) => { await patch("/workspaces/" + w.id, { name: v.name.trim() }); toast("Renamed."); onDone(); });
  return html`<form onSubmit=${save} novalidate class="row align-end">
    <${Input} form=${f} name="name" label="New name" className="field-inline" />
    <${Button} type="submit" small variant="primary" busy=${f.busy}>Save</${Button}>
    <${Button} small onClick=${onDone}>Cancel</${Button}>
    <${FormError} error=${f.error} fields=${["name"]} />
  </form>`;
}
