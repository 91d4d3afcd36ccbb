// Conversation history: visitor conversations, most recently active first, filtered by agent and
// ownership.

import { get } from "../api.js";
import { setQuery } from "../router.js";
import { Badge, Card, Empty, ErrorBox, Loading, PageHeader, Pager, Select, Table, fmtDate, fmtNum, html, useAsync, usePager } from "../ui.js";

export default function Conversations({ query }) {
  const agents = useAsync(() => get("/agents"), []);
  const list = (agents.data && agents.data.agents) || [];
  const name = (id) => (list.find((a) => a.id === id) || {}).name || "agent";
  const agentId = query.agentId || "";
  const ownership = query.ownership || "";
  const pager = usePager((cursor) => get("/history/chat", { cursor, limit: 50, agentId, ownership }), "conversations", [agentId, ownership]);
  return html`<div class="page">
    <${PageHeader} title="Conversations" subtitle="Visitor conversations across your channels. Test chats against drafts are not listed here." />
    <${Card} actions=${html`<div class="filters">
      <${Select} label="Agent" name="agentId" value=${agentId} className="field-inline" testid="conv-filter-agent"
        options=${[["", "All agents"], ...list.map((a) => [a.id, a.name])]} onChange=${(e) => setQuery({ agentId: e.currentTarget.value })} />
      <${Select} label="Owner" name="ownership" value=${ownership} className="field-inline" testid="conv-filter-ownership"
        options=${[["", "Anyone"], ["ai_owned", "AI"], ["human_owned", "Human (taken over)"]]} onChange=${(e) => setQuery({ ownership: e.currentTarget.value })} />
    </div>`}>
      <${ErrorBox} error=${pager.error} retry=${pager.reload} />
      ${pager.loading && !pager.data ? html`<${Loading} />` : html`<${Table} caption="Conversations" rowTestId="conversation-row" rows=${pager.items} columns=${[
        { label: "Conversation", render: (c) => html`<a href=${"/app/conversations/" + c.id}>…${c.id.slice(-8)}</a>` },
        { label: "Agent", render: (c) => name(c.agentId) },
        { label: "Channel", render: (c) => c.channel },
        { label: "Owner", render: (c) => html`<${Badge}>${c.ownership ? c.ownership.state : "ai_owned"}</${Badge}>` },
        { label: "Messages", render: (c) => fmtNum(c.messageCount), className: "num" },
        { label: "Last activity", render: (c) => fmtDate(c.lastMessageAt || c.updatedAt), className: "nowrap" },
      ]} empty=${html`<${Empty} title=${agentId || ownership ? "No conversations match" : "No conversations yet"}>
        ${agentId || ownership ? "Clear the filters to see all conversations." : html`Conversations appear when visitors chat with a published agent. Try it yourself in <a href="/app/chat">Test chat</a>.`}</${Empty}>`} />`}
      <${Pager} pager=${pager} label="conversations" />
    </${Card}>
  </div>`;
}
