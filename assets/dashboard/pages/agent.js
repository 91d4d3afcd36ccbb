// One agent: header (status, default, test chat, export bundle) and tabs — settings, directives, skills, context
// variables, routines, connections (for managers), revisions. Each tab lives in its own module
// (agent-*.js).

import { useState } from "../../vendor/hooks.mjs";
import { get, post } from "../api.js";
import { can } from "../session.js";
import { Badge, Button, ErrorBox, Loading, PageHeader, TabLinks, html, toast, useAsync } from "../ui.js";
import Settings from "./agent-settings.js";
import Directives from "./agent-directives.js";
import Skills from "./agent-skills.js";
import Context from "./agent-context.js";
import Routines from "./agent-routines.js";
import Connections from "./agent-connections.js";
import Revisions from "./agent-revisions.js";
import { ExportBundleButton } from "./agent-bundle.js";

const TABS = [
  ["settings", "Settings", Settings],
  ["directives", "Directives", Directives],
  ["skills", "Skills", Skills],
  ["context", "Context variables", Context],
  ["routines", "Routines", Routines],
  ["connections", "Connections", Connections, "workspace.agents.manage"],
  ["revisions", "Revisions & publish", Revisions],
];

export default function Agent({ params }) {
  const tab = params.tab || "settings";
  const agentRes = useAsync(() => get("/agents/" + params.id), [params.id]);
  const stateRes = useAsync(() => get(`/agents/${params.id}/revision-state`), [params.id]);
  const [busy, setBusy] = useState(false);
  const a = agentRes.data;
  const st = stateRes.data;
  if (agentRes.error) return html`<div class="page"><${PageHeader} title="Agent" back=${["/app/agents", "Agents"]} /><${ErrorBox} error=${agentRes.error} retry=${agentRes.reload} /></div>`;
  if (!a) return html`<${Loading} />`;

  // Every write advances the draft: refresh the agent and its revision state.
  const changed = () => { agentRes.reload(); stateRes.reload(); };
  const makeDefault = async () => {
    setBusy(true);
    try { await post(`/agents/${a.id}/default`); toast(`“${a.name}” is now the default agent.`); agentRes.reload(); } catch (e) { toast(e.message, "error"); } finally { setBusy(false); }
  };
  const tabs = TABS.filter((t) => !t[3] || can(t[3]));
  const Tab = (tabs.find((t) => t[0] === tab) || tabs[0])[2];

  return html`<div class="page" data-testid="agent-page">
    <${PageHeader} title=${a.name} back=${["/app/agents", "Agents"]}
      subtitle=${html`<span class="row">
        ${a.isDefault && html`<${Badge} tone="blue">default</${Badge}>`}
        ${st && html`<${Badge} testid="agent-revision-status">${st.status}</${Badge}>`}
        ${st && st.publishedRevision && html`<span class="muted">published ${st.publishedRevision.label}</span>`}
        ${st && st.status === "draft_changes" && html`<a href=${`/app/agents/${a.id}/revisions`}>Review and publish the draft</a>`}
      </span>`}
      actions=${html`
        <a class="btn" href=${"/app/chat?agent=" + a.id} data-testid="agent-test-chat">Test chat</a>
        <${ExportBundleButton} agent=${a} />
        ${can("workspace.agents.manage") && !a.isDefault && html`<${Button} onClick=${makeDefault} busy=${busy}>Make default</${Button}>`}`} />
    <${TabLinks} label="Agent sections" tabs=${tabs.map(([k, l]) => ({ href: `/app/agents/${a.id}/${k}`, label: l, active: k === tab, testid: "agent-tab-" + k }))} />
    <${Tab} agent=${a} state=${st} onChanged=${changed} />
  </div>`;
}
