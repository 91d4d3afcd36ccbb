// The audit log: who did what, newest first, with filters.

import { get } from "../api.js";
import { setQuery } from "../router.js";
import { session } from "../session.js";
import { Card, Empty, ErrorBox, Input, Loading, PageHeader, Pager, Select, Table, fmtDate, html, usePager } from "../ui.js";

export default function Audit({ query }) {
  const me = session();
  const filters = { action: query.action || "", actorId: query.actorId || "", targetType: query.targetType || "", targetId: query.targetId || "",
    workspaceId: query.workspaceId || "", since: query.since || "", until: query.until || "" };
  const key = JSON.stringify(filters);
  const apiFilters = { ...filters, since: filters.since ? new Date(filters.since).toISOString() : "", until: filters.until ? new Date(filters.until + "T23:59:59").toISOString() : "" };
  const pager = usePager((cursor) => get("/audit-events", { ...apiFilters, cursor, limit: 50 }), "events", [key]);
  const text = (name, label, hint) => html`<${Input} label=${label} name=${name} value=${filters[name]} className="field-inline" hint=${hint}
    onChange=${(e) => setQuery({ [name]: e.currentTarget.value.trim() })} testid=${"audit-" + name} />`;
  return html`<div class="page">
    <${PageHeader} title="Audit log" subtitle="Every change to accounts, agents, documents and settings: names and ids, never values." />
    <${Card} title="Filters"><div class="filters">
      <${Select} label="Workspace" name="workspaceId" value=${filters.workspaceId} className="field-inline"
        options=${[["", "All"], ...((me && me.workspaces) || []).map((w) => [w.id, w.name])]} onChange=${(e) => setQuery({ workspaceId: e.currentTarget.value })} />
      ${text("action", "Action", "e.g. agent.revision.published")}
      ${text("targetType", "Target type")}
      ${text("targetId", "Target id")}
      ${text("actorId", "Actor id")}
      <${Input} label="Since" name="since" type="date" value=${filters.since} className="field-inline" onChange=${(e) => setQuery({ since: e.currentTarget.value })} />
      <${Input} label="Until" name="until" type="date" value=${filters.until} className="field-inline" onChange=${(e) => setQuery({ until: e.currentTarget.value })} />
    </div></${Card}>
    <${Card}>
      <${ErrorBox} error=${pager.error} retry=${pager.reload} />
      ${pager.loading && !pager.data ? html`<${Loading} />` : html`<${Table} caption="Audit events" rowTestId="audit-row" rows=${pager.items} columns=${[
        { label: "When", render: (e) => fmtDate(e.createdAt), className: "nowrap" },
        { label: "Action", render: (e) => html`<button type="button" class="link mono small" onClick=${() => setQuery({ action: e.action })}>${e.action}</button>` },
        { label: "Actor", render: (e) => html`${e.actor.type}${e.actor.id ? html` <button type="button" class="link mono small" onClick=${() => setQuery({ actorId: e.actor.id })}>…${e.actor.id.slice(-8)}</button>` : ""}` },
        { label: "Target", render: (e) => (e.target ? html`${e.target.type} <span class="mono small">…${String(e.target.id).slice(-8)}</span>` : "—") },
        { label: "Details", render: (e) => (e.metadata && Object.keys(e.metadata).length ? html`<code class="small">${JSON.stringify(e.metadata)}</code>` : "—") },
      ]} empty=${html`<${Empty} title="No events match">Change or clear the filters.</${Empty}>`} />`}
      <${Pager} pager=${pager} label="events" />
    </${Card}>
  </div>`;
}
