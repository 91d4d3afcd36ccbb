// Notification settings: the SMTP server (configured by the deployment, tested from here), the
// network guard, and where each agent's handoff notices go.

import { useState } from "../../vendor/hooks.mjs";
import { get, post } from "../api.js";
import { can } from "../session.js";
import { Badge, Button, Card, ErrorBox, Input, Loading, Meta, PageHeader, Table, html, useAsync } from "../ui.js";

export default function Notifications() {
  const res = useAsync(() => get("/settings/notifications"), []);
  const agents = useAsync(() => get("/agents"), []);
  const s = res.data;
  return html`<div class="page">
    <${PageHeader} title="Notifications" subtitle="How Steward reaches people: handoff notices by email and webhook. Deliveries and their attempts are in the delivery log." />
    <${ErrorBox} error=${res.error} retry=${res.reload} />
    ${!s ? html`<${Loading} />` : html`
      <${Card} title="Email (SMTP)" testid="smtp-card">
        ${s.email.configured ? html`<${Meta} items=${[
          ["Status", html`<${Badge} tone="green" testid="smtp-status">configured</${Badge}>`],
          ["Server", `${s.email.host}:${s.email.port}`], ["Security", s.email.security], ["From", s.email.from],
          ["Authentication", s.email.authenticated ? "user and password" : "none"],
        ]} />` : html`<div class="alert alert-warn" data-testid="smtp-status" role="status">
          <p><strong>Email is off.</strong> No SMTP server is configured, so email notices are recorded as skipped (webhooks still go).</p>
          <p class="small">Set <code>STEWARD_SMTP_HOST</code>, <code>STEWARD_SMTP_PORT</code>, <code>STEWARD_SMTP_SECURITY</code> (starttls, tls or none), <code>STEWARD_SMTP_USER</code>, <code>STEWARD_SMTP_PASSWORD</code> and <code>STEWARD_SMTP_FROM</code> (or an <code>[smtp]</code> table in the config file) and restart.</p>
        </div>`}
        ${s.email.configured && can("workspace.settings.manage") && html`<${TestEmail} />`}
      </${Card}>
      <${Card} title="Webhooks">
        <p>Webhooks go over HTTPS to public addresses only; the network guard refuses private, loopback, link-local and cloud metadata addresses, on every redirect too.
          ${s.webhooks.allowListEntries ? ` ${s.webhooks.allowListEntries} allow-list entr${s.webhooks.allowListEntries === 1 ? "y admits" : "ies admit"} intranet targets (and plain http to them).` : " To reach an intranet service, add it to STEWARD_DELIVERY_ALLOW."}</p>
        ${!s.dashboardLinks && html`<p class="muted small">Set STEWARD_PUBLIC_URL so notices link to the conversation in this dashboard.</p>`}
        <p><a href="/app/settings/deliveries">Open the delivery log</a></p>
      </${Card}>
      <${Card} title="Where handoff notices go">
        <p class="muted">For each agent: its <code>contact_human</code> notify skill if it has one (disabled: no notices), else the agent's contact delivery setting, else the workspace owner. Without recipient emails, the owner gets the email.</p>
        ${agents.data && html`<${Table} caption="Agents" rows=${agents.data.agents} columns=${[
          { label: "Agent", render: (a) => html`<a href=${"/app/agents/" + a.id}>${a.name}</a>` },
          { label: "Contact delivery", render: (a) => destination(a.contactRequestDelivery) },
          { label: "Hands off on a miss", render: (a) => (a.handoffOnRetrievalMiss ? "yes" : "no") },
          { label: "", render: (a) => html`<a href=${"/app/agents/" + a.id + "/skills"}>Notify skills</a>` },
        ]} />`}
      </${Card}>`}
  </div>`;
}

function destination(d) {
  if (!d) return "the workspace owner";
  const parts = [];
  if (d.recipientEmails && d.recipientEmails.length) parts.push(d.recipientEmails.join(", "));
  if (d.webhook && d.webhook.url) parts.push("webhook");
  return parts.length ? parts.join(" + ") : "the workspace owner";
}

function TestEmail() {
  const [to, setTo] = useState("");
  const [busy, setBusy] = useState(false);
  const [answer, setAnswer] = useState(null);
  const [error, setError] = useState(null);
  const send = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null); setAnswer(null);
    try { setAnswer(await post("/settings/notifications/test-email", { to: to.trim() })); } catch (err) { setError(err); } finally { setBusy(false); }
  };
  return html`<form class="row" onSubmit=${send} novalidate>
    <${Input} label="Send a test message to" name="to" type="email" value=${to} onInput=${(e) => setTo(e.currentTarget.value)}
      error=${error && error.field === "to" ? error.message : null} className="field-inline grow" testid="test-email-to" />
    <${Button} type="submit" busy=${busy} disabled=${!to.trim()} testid="test-email-send">Send test</${Button}>
    ${error && error.field !== "to" && html`<div class="alert alert-error" role="alert">${error.message}</div>`}
    ${answer && html`<div class=${"alert " + (answer.ok ? "alert-info" : "alert-error")} role="status" data-testid="test-email-answer">
      ${answer.ok ? "Sent." : "Not sent."} The server answered: ${answer.code ?? ""} ${answer.message}</div>`}
  </form>`;
}
