// Webhook destinations: where routines send their result when they end (a routine's `export:` line
// names one by its id). Each has a signing secret, shown once when it is created or rotated; the
// list shows how the last delivery went. How a receiver checks the signature is explained below.

import { useEffect, useRef, useState } from "../../vendor/hooks.mjs";
import { ApiError, del, get, post, put } from "../api.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Empty, ErrorBox, FormError, Input, Loading, Modal, PageHeader, SecretOnce, Table, confirm, fmtDate, html, toast, useAsync, useForm,
} from "../ui.js";

const PATH = "/settings/webhook-destinations";
const STATUS_TONE = { success: "green", retry: "amber", failed: "red", skipped: "gray" };

export default function WebhookDestinations() {
  const manage = can("workspace.settings.manage");
  const res = useAsync(() => get(PATH), []);
  const [dialog, setDialog] = useState(null); // {kind: "create"} | {kind: "edit", d} | {kind: "secret", d, secret, rotated}
  const [problem, setProblem] = useState(null);
  const items = (res.data && res.data.destinations) || [];
  // a dialog that was replaced by the next one still reports its close: only close the one showing
  const closeKind = (kind) => () => setDialog((cur) => (cur && cur.kind === kind ? null : cur));

  const rotate = async (d) => {
    const ok = await confirm({
      title: "Rotate the signing secret?",
      message: `A new secret is made for “${d.name}” and the current one stops signing at once: from the next delivery on, your receiver must check signatures with the new secret.`,
      confirmLabel: "Rotate secret",
      danger: true,
    });
    if (!ok) return;
    setProblem(null);
    try {
      const r = await post(`${PATH}/${d.id}/rotate-secret`);
      setDialog({ kind: "secret", d: r.destination, secret: r.secret, rotated: true });
      res.reload();
    } catch (e) { setProblem(e); }
  };
  const remove = async (d) => {
    if (!(await confirm({ title: "Delete destination?", message: `“${d.name}” (${d.url}) will be deleted. Routines can no longer send results to it.`, confirmLabel: "Delete", danger: true }))) return;
    setProblem(null);
    try { await del(`${PATH}/${d.id}`); toast("Destination deleted."); res.reload(); } catch (e) { setProblem(e); }
  };

  return html`<div class="page">
    <${PageHeader} title="Webhook destinations"
      subtitle="Where routines send their results: when a routine ends at a completion or a handoff it exports, Steward POSTs the collected values here, signed with the destination's secret."
      actions=${manage && html`<${Button} variant="primary" onClick=${() => setDialog({ kind: "create" })} testid="destination-new">New destination</${Button}>`} />
    ${problem && html`<${Problem} error=${problem} onDismiss=${() => setProblem(null)} />`}
    <${Card} title="Destinations" testid="destinations-card">
      <${ErrorBox} error=${res.error} retry=${res.reload} />
      ${!res.data && !res.error ? html`<${Loading} />` : html`<${Table} caption="Webhook destinations" rowTestId="destination-row" rows=${items} columns=${[
        { label: "Name", render: (d) => html`<strong data-testid="destination-name">${d.name}</strong>` },
        { label: "URL", render: (d) => html`<code class="rt-url">${d.url}</code>` },
        { label: "Last delivery", render: (d) => (d.lastDeliveryStatus
          ? html`<${Badge} tone=${STATUS_TONE[d.lastDeliveryStatus]} testid="destination-status">${d.lastDeliveryStatus}</${Badge}> <span class="muted small nowrap">${fmtDate(d.lastDeliveryAt)}</span>`
          : html`<span class="muted" data-testid="destination-status">never</span>`) },
        { label: "Id (for export:)", render: (d) => html`<${CopyId} id=${d.id} />` },
        { label: "Created", render: (d) => fmtDate(d.createdAt), className: "nowrap" },
        { label: html`<span class="sr-only">Actions</span>`, className: "nowrap", render: (d) => manage && html`<div class="row rt-row-actions">
          <${Button} small onClick=${() => setDialog({ kind: "edit", d })} testid="destination-edit" aria-label=${`Edit ${d.name}`}>Edit</${Button}>
          <${Button} small onClick=${() => rotate(d)} testid="destination-rotate" aria-label=${`Rotate secret of ${d.name}`}>Rotate secret…</${Button}>
          <${Button} small variant="danger" onClick=${() => remove(d)} testid="destination-delete" aria-label=${`Delete ${d.name}`}>Delete</${Button}>
        </div>` },
      ]} empty=${html`<${Empty} title="No destinations yet">Add the HTTPS endpoint of your CRM, ticketing system or automation tool, then name its id in a routine's <code>export:</code> line.</${Empty}>`} />`}
      <p class="muted small">Every attempt is in the <a href="/app/settings/deliveries">delivery log</a>. Deliveries go only when the agent's webhook exports are on.</p>
    </${Card}>
    <${SignatureHelp} />
    ${dialog && dialog.kind === "create" && html`<${DestinationForm} onClose=${closeKind("create")}
      onCreated=${(r) => { res.reload(); setDialog({ kind: "secret", d: r.destination, secret: r.secret }); }} />`}
    ${dialog && dialog.kind === "edit" && html`<${DestinationForm} d=${dialog.d} onClose=${closeKind("edit")}
      onSaved=${() => { res.reload(); setDialog(null); toast("Destination saved."); }} />`}
    ${dialog && dialog.kind === "secret" && html`<${SecretDialog} d=${dialog.d} secret=${dialog.secret} rotated=${dialog.rotated} onClose=${closeKind("secret")} />`}
  </div>`;
}

/** A refused delete (naming the routines that export to the destination) or another failure. */
function Problem({ error, onDismiss }) {
  const d = error.details || {};
  const routines = Array.isArray(d.routines) ? d.routines : null;
  return html`<div class="alert alert-error" role="alert" data-testid="destination-problem">
    ${routines ? html`<p><strong>This destination is in use.</strong> ${routines.length === 1 ? "The routine" : "These routines"} export${routines.length === 1 ? "s" : ""} to it:</p>
      <ul>${routines.map((r) => html`<li data-testid="destination-user">${r}</li>`)}</ul>
      <p class="small">Remove or change the routine's <code>export:</code> line (on the agent's Routines tab) first, then delete the destination.</p>`
      : error.code === "encryption_not_configured" ? html`<${EncryptionHelp} error=${error} />`
      : html`<p>${error.message}</p>`}
    <${Button} small onClick=${onDismiss}>Dismiss</${Button}>
  </div>`;
}

function EncryptionHelp({ error }) {
  return html`<div data-testid="encryption-not-configured">
    <p><strong>This server has no encryption key, so it cannot keep signing secrets.</strong> The server said: ${error.message}.</p>
    <p class="small">Make a key with <code>openssl rand -hex 32</code>, set it as <code>CONNECTOR_ENCRYPTION_KEY</code> in Steward's environment and restart Steward. Keep the key safe: the stored secrets can only be read with it.</p>
  </div>`;
}

function CopyId({ id }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try { await navigator.clipboard.writeText(id); setCopied(true); setTimeout(() => setCopied(false), 2000); } catch { toast("Copying is blocked here: select the id and copy it.", "info"); }
  };
  return html`<span class="rt-id"><code title=${id}>${id.slice(0, 8)}…</code>
    <button type="button" class="link small" onClick=${copy} aria-label=${"Copy the id " + id}>${copied ? "Copied" : "Copy"}</button></span>`;
}

function DestinationForm({ d, onClose, onCreated, onSaved }) {
  const f = useForm({ name: d ? d.name : "", url: d ? d.url : "" });
  const submit = f.submit(async (v) => {
    const body = { name: v.name.trim(), url: v.url.trim() };
    if (d) { await put(`${PATH}/${d.id}`, body); onSaved(); } else onCreated(await post(PATH, body));
  });
  const enc = f.error instanceof ApiError && f.error.code === "encryption_not_configured";
  return html`<${Modal} open title=${d ? `Edit “${d.name}”` : "New webhook destination"} onClose=${onClose} testid="destination-dialog">
    <form onSubmit=${submit} novalidate>
      ${enc ? html`<div class="alert alert-error" role="alert"><${EncryptionHelp} error=${f.error} /></div>` : html`<${FormError} error=${f.error} fields=${["name", "url"]} />`}
      <${Input} form=${f} name="name" label="Name" required maxlength="120" testid="destination-name-input" hint="How you recognise it, e.g. “CRM refunds”." />
      <${Input} form=${f} name="url" label="URL" type="url" required testid="destination-url-input"
        hint="HTTPS to a public address. An intranet host needs an entry in STEWARD_DELIVERY_ALLOW on the server." />
      ${d && html`<p class="hint">The signing secret stays the same; use Rotate secret to replace it.</p>`}
      <div class="form-actions">
        <${Button} onClick=${onClose}>Cancel</${Button}>
        <${Button} type="submit" variant="primary" busy=${f.busy} testid="destination-save">${d ? "Save" : "Create destination"}</${Button}>
      </div>
    </form>
  </${Modal}>`;
}

/** The secret, this once: Copy, and a clear warning that it cannot be shown again. */
function SecretDialog({ d, secret, rotated, onClose }) {
  const box = useRef(null);
  useEffect(() => {
    const t = setTimeout(() => {
      const input = box.current && box.current.querySelector("input");
      if (input) input.focus();
    }, 0);
    return () => clearTimeout(t);
  }, []);
  return html`<${Modal} open title=${rotated ? `New secret for “${d.name}”` : `“${d.name}” is ready`} onClose=${onClose} testid="destination-secret-dialog"
    footer=${html`<${Button} variant="primary" onClick=${onClose} testid="destination-secret-done">I have copied it</${Button}>`}>
    <div class="alert alert-warn" role="alert" data-testid="destination-secret-warning">
      <strong>Copy the signing secret now — you won't see it again.</strong> Steward keeps it encrypted and never shows it a second time. If it is lost, rotate it to get a new one.
    </div>
    <div ref=${box}><${SecretOnce} label="Signing secret" secret=${secret} testid="destination-secret" /></div>
    ${rotated && html`<p class="small">The previous secret no longer signs deliveries: update your receiver now.</p>`}
    <p class="small muted">Your receiver checks each request's <code>X-Service-Signature</code> with this secret (see “Checking the signature” on this page).</p>
  </${Modal}>`;
}

function SignatureHelp() {
  return html`<${Card} title="Checking the signature" testid="signature-help">
    <p>Each delivery is a <code>POST</code> with a JSON body <code>{destinationRef, source: {routineId, routineName, executionId, stepId, terminalKind, status}, data: {slot: value, …}}</code> and these headers:</p>
    <ul class="rt-headers">
      <li><code>X-Service-Timestamp</code>: the Unix time in seconds when it was signed;</li>
      <li><code>${"X-Service-Signature: sha256=<hex>"}</code>: the HMAC-SHA256, keyed with the destination's secret, of <code>${'"<timestamp>.<raw body>"'}</code> (the timestamp, a dot, then the body bytes exactly as received);</li>
      <li><code>Idempotency-Key</code>: the same on every retry of one delivery, so a repeat can be ignored.</li>
    </ul>
    <p class="small">Compute the HMAC over the raw body before parsing it, compare in constant time, and refuse timestamps more than a few minutes old. For example in Python:</p>
    <pre class="json rt-code-sample">${`mac = hmac.new(secret.encode(), timestamp.encode() + b"." + raw_body, hashlib.sha256)
expected = "sha256=" + mac.hexdigest()
ok = hmac.compare_digest(expected, request.headers["X-Service-Signature"])`}</pre>
    <p class="small muted">A failed attempt (no answer, 5xx, 429) is retried; the last status shows in the list above.</p>
  </${Card}>`;
}
