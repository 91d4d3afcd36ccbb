// Connections: channels through which other AI agents and backends reach this one agent. An MCP
// credential (scm_…) lets an AI client — Claude Desktop, an IDE assistant, another agent — talk to
// the agent over MCP at /mcp; a REST credential (scr_…) lets a backend call the agent's chat route.
// A secret is shown once, when it is created or rotated, together with a ready-to-paste client
// configuration; it lives only in this page's memory until the dialog is dismissed or the page left.

import { useEffect, useRef, useState } from "../../vendor/hooks.mjs";
import { ApiError, get, post } from "../api.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, CopyButton, Empty, ErrorBox, FormError, Input, Loading, Modal, Select, Table, confirm, fmtDate, html, toast, useAsync, useForm, useId,
} from "../ui.js";

const AUDIENCE = { mcp: "MCP", rest: "REST" };

/** The agent's name as an MCP server key: lowercase words joined by dashes. */
export function slugOf(name) {
  const s = String(name || "").toLowerCase().normalize("NFKD").replace(/[\u0300-\u036f]/g, "")
    .replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 48).replace(/-+$/, "");
  return s || "steward-agent";
}

/** What stands in for a secret that is no longer shown: it names the credential's prefix. */
export function placeholderOf(c) {
  return `<your ${c.prefix || (c.audience === "mcp" ? "scm_" : "scr_")}… secret>`;
}

/** An MCP client's configuration entry (the `mcpServers` shape most clients read). */
export function mcpSnippet(origin, agent, secret) {
  const entry = { type: "http", url: `${origin}/mcp`, headers: { Authorization: `Bearer ${secret}` } };
  return JSON.stringify({ mcpServers: { [slugOf(agent.name)]: entry } }, null, 2);
}

/** A backend's first message to the agent, as curl. */
export function restSnippet(origin, agent, secret) {
  return [
    `curl -X POST '${origin}/api/v1/agents/${agent.id}/chat' \\`,
    `  -H 'Authorization: Bearer ${secret}' \\`,
    "  -H 'Content-Type: application/json' \\",
    `  -d '{"message":"Hello"}'`,
  ].join("\n");
}

function snippetOf(agent, c, secret) {
  const s = secret || placeholderOf(c);
  return c.audience === "mcp" ? mcpSnippet(location.origin, agent, s) : restSnippet(location.origin, agent, s);
}

/** RFC 3339 for the end of a `yyyy-mm-dd` day in the operator's time zone. */
function endOfDay(day) {
  const d = new Date(`${day}T23:59:59`);
  if (isNaN(d)) throw new ApiError(400, "validation_failed", "Enter the expiry as a date, or leave it empty", { field: "expiresAt" });
  return d.toISOString();
}

function today() {
  const d = new Date();
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
}

export default function Connections({ agent }) {
  if (!can("workspace.agents.manage")) {
    return html`<${Card} title="Channels for other agents" testid="cc-card">
      <p class="alert alert-info" data-testid="cc-no-permission">Connecting other agents and backends to this agent needs the permission to manage agents. Ask a workspace admin.</p>
    </${Card}>`;
  }
  return html`<${Manager} agent=${agent} />`;
}

function Manager({ agent }) {
  const path = `/agents/${agent.id}/channel-credentials`;
  const res = useAsync(() => get(path), [path]);
  // {n, issued: null} (the form) | {n, issued: {credential, secret, rotated}}: the secret exists only here
  const [dialog, setDialog] = useState(null);
  const seq = useRef(0);
  const [selected, setSelected] = useState(null);
  const [problem, setProblem] = useState(null); // {what, error}
  const items = (res.data && res.data.credentials) || [];
  const active = items.filter((c) => c.status === "active");
  const shown = active.find((c) => c.id === selected) || active[0] || null;
  // a closed dialog reports its close late: only close the one it was
  const closeOf = (n) => () => setDialog((cur) => (cur && cur.n === n ? null : cur));
  const open = (issued) => setDialog({ n: ++seq.current, issued });
  // a page restored from the back/forward cache must not show a secret again
  useEffect(() => {
    const forget = (e) => { if (e.type === "pagehide" || e.persisted) setDialog((cur) => (cur && cur.issued ? null : cur)); };
    window.addEventListener("pagehide", forget);
    window.addEventListener("pageshow", forget);
    return () => { window.removeEventListener("pagehide", forget); window.removeEventListener("pageshow", forget); };
  }, []);
  const replace = (c) => res.setData((d) => ({ ...d, credentials: ((d && d.credentials) || []).map((x) => (x.id === c.id ? c : x)) }));

  const rotate = async (c) => {
    const ok = await confirm({
      title: `Rotate the secret of “${c.label}”?`,
      message: `A new secret is made and the current one (${c.prefix}…) stops working at once: ${c.audience === "mcp" ? "MCP clients" : "backends"} still using it are refused, and once they have the new secret a new conversation starts. The new secret is shown once.`,
      confirmLabel: "Rotate secret",
      danger: true,
    });
    if (!ok) return;
    setProblem(null);
    try {
      const r = await post(`${path}/${c.id}/rotate`);
      replace(r.credential);
      setSelected(r.credential.id);
      open({ credential: r.credential, secret: r.secret, rotated: true });
    } catch (e) { setProblem({ what: `Could not rotate “${c.label}”.`, error: e }); res.reload(); }
  };
  const revoke = async (c) => {
    const ok = await confirm({
      title: `Revoke “${c.label}”?`,
      message: `The ${AUDIENCE[c.audience]} credential ${c.prefix}… stops working at once: ${c.audience === "mcp" ? "MCP clients" : "backends"} using it can no longer reach ${agent.name}. This cannot be undone; create a new credential to connect again.`,
      confirmLabel: "Revoke credential",
      danger: true,
    });
    if (!ok) return;
    setProblem(null);
    try {
      const r = await post(`${path}/${c.id}/revoke`);
      replace(r.credential);
      toast(`“${c.label}” revoked. It no longer reaches this agent.`);
      // its Revoke button is gone: keep the keyboard in the row
      setTimeout(() => { const el = document.querySelector(`[data-cc-focus="${c.id}"]`); if (el) el.focus(); }, 0);
    } catch (e) { setProblem({ what: `Could not revoke “${c.label}”.`, error: e }); res.reload(); }
  };

  return html`<div class="stack">
    <${Card} title="Channels for other agents" testid="cc-card"
      actions=${html`<${Button} variant="primary" onClick=${() => { setProblem(null); open(null); }} testid="cc-new">New credential</${Button}>`}>
      <${Intro} agent=${agent} />
      ${problem && html`<div class="alert alert-error row" role="alert" data-testid="cc-problem">
        <span class="grow"><strong>${problem.what}</strong> ${problem.error.message}</span>
        <${Button} small onClick=${() => setProblem(null)}>Dismiss</${Button}>
      </div>`}
      <${ErrorBox} error=${res.error} retry=${res.reload} />
      ${!res.data && !res.error ? html`<${Loading} />` : html`<${Table} caption=${`Channel credentials of ${agent.name}`} rowTestId="cc-row" rows=${items} columns=${[
        { label: "Label", render: (c) => html`<strong data-testid="cc-label" data-cc-focus=${c.id} tabindex="-1">${c.label}</strong>` },
        { label: "Audience", render: (c) => html`<span class="cc-audience" data-testid="cc-audience" title=${c.audience === "mcp" ? "AI clients over MCP" : "Backends over REST"}>${AUDIENCE[c.audience] || c.audience}</span>` },
        { label: "Secret", render: (c) => html`<code data-testid="cc-prefix">${c.prefix}…</code>`, className: "nowrap" },
        { label: "Status", render: (c) => html`<${Badge} testid="cc-status">${c.status}</${Badge}>` },
        { label: "Created", render: (c) => html`<${When} at=${c.createdAt} />` },
        { label: "Last used", render: (c) => html`<${When} at=${c.lastUsedAt} />` },
        { label: "Expires", render: (c) => html`<${When} at=${c.expiresAt} />` },
        { label: html`<span class="sr-only">Actions</span>`, className: "nowrap", render: (c) => html`<div class="row rt-row-actions">
          ${c.status === "active" && html`<${Button} small onClick=${() => setSelected(c.id)} aria-pressed=${shown && shown.id === c.id ? "true" : "false"}
            testid="cc-setup" aria-label=${`Client setup for ${c.label}`}>Setup</${Button}>`}
          ${c.status === "active" && html`<${Button} small onClick=${() => rotate(c)} testid="cc-rotate"
            aria-label=${`Rotate the secret of ${c.label}`}>Rotate…</${Button}>`}
          ${c.status !== "revoked" && html`<${Button} small variant="danger" onClick=${() => revoke(c)} testid="cc-revoke"
            aria-label=${`Revoke ${c.label}`}>Revoke…</${Button}>`}
        </div>` },
      ]} empty=${html`<${Empty} title="No credentials yet">Create one for each client that should talk to this agent, so you can revoke them one at a time.</${Empty}>`} />`}
    </${Card}>
    ${res.data && html`<${Setup} agent=${agent} credential=${shown} />`}
    ${dialog && html`<${CredentialDialog} path=${path} agent=${agent} issued=${dialog.issued} onClose=${closeOf(dialog.n)}
      onCreated=${(r) => {
        res.reload();
        setSelected(r.credential.id);
        setDialog((cur) => (cur && cur.n === dialog.n ? { ...cur, issued: { credential: r.credential, secret: r.secret } } : cur));
      }} />`}
  </div>`;
}

/** A time as its day and, beside or below it, its time of day; "never" when there is none. */
function When({ at }) {
  const d = at ? new Date(at) : null;
  if (!d || isNaN(d)) return html`<span class="muted">${at || "never"}</span>`;
  return html`<time datetime=${at} title=${fmtDate(at)}>
    <span class="nowrap">${d.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" })}</span>
    ${" "}<span class="nowrap muted">${d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })}</span>
  </time>`;
}

function Intro({ agent }) {
  return html`<div class="cc-intro" data-testid="cc-intro">
    <p>Give other software its own way in to <strong>${agent.name}</strong>, with one credential per client:</p>
    <ul class="cc-kinds">
      <li><strong>MCP</strong> — for other AI agents, such as Claude Desktop or an assistant in your IDE. They connect over the Model Context Protocol at <code>${location.origin}/mcp</code> and converse with this agent.</li>
      <li><strong>REST</strong> — for your own backends and scripts: they send messages to <code>POST /api/v1/agents/${agent.id}/chat</code>.</li>
    </ul>
    <p class="muted small">A credential reaches only this agent — not other agents, documents or settings. Steward keeps only a hash of its secret, so the secret is shown once, when you create or rotate it; revoke a credential to cut its client off at once.</p>
  </div>`;
}

/** A read-only snippet with its label and a Copy button. */
function Snippet({ label, what, text, testid, hint }) {
  const id = useId("cc-snippet");
  return html`<div class="field">
    <div class="ch-label-row">
      <label for=${id}>${label}</label>
      <${CopyButton} text=${text} what=${what} testid=${testid + "-copy"} />
    </div>
    <textarea id=${id} class="mono ch-snippet cc-snippet" readonly rows=${text.split("\n").length} spellcheck="false" value=${text}
      data-testid=${testid} aria-describedby=${hint ? id + "-hint" : undefined} onFocus=${(e) => e.currentTarget.select()}></textarea>
    ${hint && html`<p class="hint" id=${id + "-hint"}>${hint}</p>`}
  </div>`;
}

function snippetLabel(c) {
  return c.audience === "mcp" ? "MCP client configuration" : "Example request (curl)";
}

function snippetWhat(c) {
  return c.audience === "mcp" ? "the MCP client configuration" : "the example request";
}

function snippetHint(c) {
  return c.audience === "mcp"
    ? html`Add the entry under <code>mcpServers</code> in your client's MCP settings (for example <code>.mcp.json</code>, <code>claude_desktop_config.json</code> or your IDE's MCP configuration). A client that only starts local servers can reach it through a bridge such as <code>mcp-remote</code>.`
    : html`The answer carries a <code>conversationId</code>: send it with the next message to continue the same conversation.`;
}

/** The configuration for the selected active credential, its secret as a placeholder. */
function Setup({ agent, credential: c }) {
  return html`<${Card} title="Connect a client" testid="cc-setup-card">
    ${!c ? html`<p class="muted" data-testid="cc-setup-none">Create a credential to get a configuration ready to paste into your client.</p>` : html`
      <p class="small" data-testid="cc-setup-for">For <strong>${c.label}</strong> (${AUDIENCE[c.audience]}, secret <code>${c.prefix}…</code>).
        Replace the placeholder with the secret you copied when the credential was made; if it is lost, rotate the credential to get a new one.</p>
      <${Snippet} label=${snippetLabel(c)} what=${snippetWhat(c)} text=${snippetOf(agent, c, null)} testid="cc-snippet" hint=${snippetHint(c)} />`}
  </${Card}>`;
}

/**
 * One dialog: the form, then the new secret in the same dialog (so focus returns to what opened
 * it); a rotation opens it at the secret.
 */
function CredentialDialog({ path, agent, issued, onClose, onCreated }) {
  return html`<${Modal} open wide=${!!issued} onClose=${onClose} testid=${issued ? "cc-secret-dialog" : "cc-create-dialog"}
    title=${!issued ? "New channel credential" : issued.rotated ? `New secret for “${issued.credential.label}”` : `“${issued.credential.label}” is ready`}
    footer=${issued && html`<${Button} variant="primary" onClick=${onClose} testid="cc-secret-done">I have copied it</${Button}>`}>
    ${issued ? html`<${SecretShown} agent=${agent} ...${issued} />` : html`<${CreateForm} path=${path} agent=${agent} onClose=${onClose} onCreated=${onCreated} />`}
  </${Modal}>`;
}

function CreateForm({ path, agent, onClose, onCreated }) {
  const f = useForm({ audience: "mcp", label: "", expiresOn: "" });
  const submit = f.submit(async (v) => {
    const body = { audience: v.audience, label: v.label.trim() };
    if (v.expiresOn) body.expiresAt = endOfDay(v.expiresOn);
    onCreated(await post(path, body));
  });
  const mcp = f.values.audience === "mcp";
  return html`<form onSubmit=${submit} novalidate>
    <${FormError} error=${f.error} fields=${["audience", "label", "expiresAt"]} />
    <${Select} form=${f} name="audience" label="Who connects" testid="cc-audience-input" options=${[
      ["mcp", "MCP — an AI agent or assistant"],
      ["rest", "REST — a backend or script"],
    ]} hint=${mcp ? `It talks to ${agent.name} over MCP at /mcp. Its secret begins with scm_.` : `It calls POST /api/v1/agents/…/chat. Its secret begins with scr_.`} />
    <${Input} form=${f} name="label" label="Label" required maxlength="120" testid="cc-label-input"
      hint=${mcp ? "Who uses it, e.g. “Claude Desktop (Ana)”." : "Who uses it, e.g. “Order backend”."} />
    <${Input} form=${f} name="expiresOn" errorField="expiresAt" label="Expires on (optional)" type="date" min=${today()} testid="cc-expires-input"
      hint="Leave empty for no expiry. It stops working at the end of that day, your time." />
    <div class="form-actions">
      <${Button} onClick=${onClose}>Cancel</${Button}>
      <${Button} type="submit" variant="primary" busy=${f.busy} testid="cc-create">Create credential</${Button}>
    </div>
  </form>`;
}

/** The secret, this once: Copy, the configuration with the secret in it, and the warning. */
function SecretShown({ agent, credential: c, secret, rotated }) {
  const box = useRef(null);
  const id = useId("cc-secret");
  useEffect(() => {
    const t = setTimeout(() => box.current && box.current.focus(), 0);
    return () => clearTimeout(t);
  }, []);
  return html`<div class="alert alert-warn" role="alert" data-testid="cc-secret-warning">
    <strong>Copy the secret now — it won't be shown again.</strong> Steward keeps only a hash of it. If it is lost, rotate the credential to get a new one.
  </div>
  <div class="secret cc-secret">
    <label for=${id}>${AUDIENCE[c.audience]} secret</label>
    <div class="secret-row">
      <input id=${id} ref=${box} class="mono" readonly value=${secret} spellcheck="false" onFocus=${(e) => e.currentTarget.select()} data-testid="cc-secret-value" />
      <${CopyButton} text=${secret} what="the secret" testid="cc-secret-copy" />
    </div>
  </div>
  ${rotated && html`<p class="small" data-testid="cc-rotated-note">The previous secret stopped working: give the new one to the client now.</p>`}
  <${Snippet} label=${snippetLabel(c)} what=${snippetWhat(c)} text=${snippetOf(agent, c, secret)} testid="cc-secret-snippet" hint=${snippetHint(c)} />`;
}
