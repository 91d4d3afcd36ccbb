// Shared by personal tokens and service credentials: a create form (name, permissions, expiry),
// the secret shown once, the list and revoking.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, post } from "../api.js";
import { Badge, Button, Card, Checkbox, Empty, ErrorBox, FormError, Input, Loading, SecretOnce, Table, confirm, fmtDate, html, toast, useAsync, useForm } from "../ui.js";

export function CredentialManager({ path, listKey, secretKey, itemKey, title, permissions, requirePermissions, noun, hint }) {
  const res = useAsync(() => get(path), [path]);
  const [secret, setSecret] = useState(null);
  const f = useForm({ name: "", expiresInDays: "", perms: [] });
  const create = f.submit(async (v) => {
    const body = { name: v.name.trim() };
    if (v.expiresInDays) body.expiresInDays = Number(v.expiresInDays);
    if (v.perms.length || requirePermissions) body.permissions = v.perms;
    const r = await post(path, body);
    setSecret(r.secret);
    f.setValues({ name: "", expiresInDays: "", perms: [] });
    res.reload();
  });
  const revoke = async (t) => {
    if (!(await confirm({ title: `Revoke ${noun}?`, message: `“${t.name}” stops working at its next request.`, confirmLabel: "Revoke", danger: true }))) return;
    try { await del(`${path}/${t.id}`); toast(`${noun[0].toUpperCase() + noun.slice(1)} revoked.`); res.reload(); } catch (e) { toast(e.message, "error"); }
  };
  const items = (res.data && res.data[listKey]) || [];
  return html`<${Card} title=${title}>
    <p class="muted">${hint}</p>
    <form onSubmit=${create} novalidate>
      <${FormError} error=${f.error} fields=${["name", "permissions", "expiresInDays", "expiresAt"]} />
      <div class="form-grid">
        <${Input} form=${f} name="name" label="Name" required testid=${noun.replace(/ /g, "-") + "-name"} />
        <${Input} form=${f} name="expiresInDays" label="Expires after (days, optional)" type="number" min="1" />
      </div>
      <fieldset><legend>Permissions${requirePermissions ? "" : " (none checked: every permission of your role)"}</legend>
        <div class="perm-grid">${permissions.map((p) => html`<${Checkbox} name=${"perm-" + p} label=${p} checked=${f.values.perms.includes(p)}
          onChange=${(on) => f.set("perms", on ? [...f.values.perms, p] : f.values.perms.filter((x) => x !== p))} />`)}</div>
      </fieldset>
      <div class="form-actions"><${Button} type="submit" variant="primary" busy=${f.busy} testid=${noun.replace(/ /g, "-") + "-create"}>Create ${noun}</${Button}></div>
    </form>
    ${secret && html`<${SecretOnce} label=${`Your new ${noun}`} secret=${secret} />`}
    <${ErrorBox} error=${res.error} retry=${res.reload} />
    ${res.loading && !res.data ? html`<${Loading} />` : html`<${Table} caption=${title} rowTestId=${noun.replace(/ /g, "-") + "-row"} rows=${items} columns=${[
      { label: "Name", render: (t) => html`<strong>${t.name}</strong>${t.prefix ? html` <code class="small">${t.prefix}…</code>` : ""}` },
      { label: "Permissions", render: (t) => (t.permissions && t.permissions.length ? html`<span class="small">${t.permissions.join(", ")}</span>` : html`<span class="muted">role's permissions</span>`) },
      { label: "Last used", render: (t) => fmtDate(t.lastUsedAt) },
      { label: "Expires", render: (t) => (t.expiresAt ? fmtDate(t.expiresAt) : "never") },
      { label: "Status", render: (t) => html`<${Badge}>${t.revokedAt ? "revoked" : t.expiresAt && Date.parse(t.expiresAt) < Date.now() ? "expired" : "active"}</${Badge}>` },
      { label: "", render: (t) => !t.revokedAt && html`<${Button} small variant="danger" onClick=${() => revoke(t)} testid="revoke">Revoke</${Button}>` },
    ]} empty=${html`<${Empty} title=${`No ${noun}s`}>Create one above to call the API from scripts and integrations.</${Empty}>`} />`}
  </${Card}>`;
}
