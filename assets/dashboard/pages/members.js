// Members & invitations: the organization's members (GET /account/members), inviting by email and
// role (the token is shown once, as a link), the invitation list by status, revoking.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, post } from "../api.js";
import { setQuery } from "../router.js";
import { session } from "../session.js";
import { Badge, Button, Card, Empty, ErrorBox, FormError, Input, Loading, PageHeader, SecretOnce, Select, Table, confirm, fmtDate, html, toast, useAsync, useForm } from "../ui.js";

const ROLE_TONES = { owner: "blue", admin: "green", member: "gray" };

/** The day someone joined (the full time is in the title). */
function fmtDay(s) {
  if (!s) return "—";
  const d = new Date(s);
  if (isNaN(d)) return String(s);
  return d.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });
}

function MemberList({ me }) {
  const res = useAsync(() => get("/account/members"), []);
  const members = (res.data && res.data.members) || [];
  const myId = me && me.user && me.user.id;
  return html`<${Card} title="Members" testid="members">
    <${ErrorBox} error=${res.error} retry=${res.reload} />
    ${res.loading && !res.data ? html`<${Loading} />` : !res.error && html`<${Table} caption="Members" rowTestId="member-row" rowKey=${(m) => m.userId} rows=${members} columns=${[
      { label: "Name", render: (m) => html`${m.name ? m.name : html`<span class="muted">—</span>`}${m.userId === myId ? html` <${Badge} tone="gray">you</${Badge}>` : ""}` },
      { label: "Email", render: (m) => m.email },
      { label: "Role", render: (m) => html`<${Badge} tone=${ROLE_TONES[m.role] || "gray"}>${m.role}</${Badge}>` },
      { label: "Joined", className: "nowrap", render: (m) => html`<time datetime=${m.joinedAt} title=${fmtDate(m.joinedAt)}>${fmtDay(m.joinedAt)}</time>` },
    ]} empty=${html`<${Empty} title="No members yet" testid="members-empty">People appear here once they accept an invitation.</${Empty}>`} />`}
  </${Card}>`;
}

export default function Members({ query }) {
  const status = query.status || "";
  const res = useAsync(() => get("/account/invitations", { status }), [status]);
  const [created, setCreated] = useState(null);
  const f = useForm({ email: "", role: "member", expiresInDays: "7" });
  const me = session();
  const invite = f.submit(async (v) => {
    const body = { role: v.role, expiresInDays: Number(v.expiresInDays) || 7 };
    if (v.email.trim()) body.email = v.email.trim();
    const r = await post("/account/invitations", body);
    setCreated(r);
    f.set("email", "");
    res.reload();
  });
  const revoke = async (i) => {
    if (!(await confirm({ title: "Revoke invitation?", message: `The invitation${i.email ? " for " + i.email : ""} stops working.`, confirmLabel: "Revoke", danger: true }))) return;
    try { await del("/account/invitations/" + i.id); toast("Invitation revoked."); res.reload(); } catch (e) { toast(e.message, "error"); }
  };
  const link = created && `${location.origin}/app/join#token=${encodeURIComponent(created.token)}`;
  const items = (res.data && res.data.invitations) || [];
  return html`<div class="page">
    <${PageHeader} title="Members & invitations" subtitle=${`People join ${me && me.organization ? me.organization.name : "your organization"} by invitation. Roles apply in every workspace.`} />
    <${MemberList} me=${me} />
    <${Card} title="Invite someone">
      <form onSubmit=${invite} novalidate>
        <${FormError} error=${f.error} fields=${["email", "role", "expiresInDays"]} />
        <div class="form-grid">
          <${Input} form=${f} name="email" label="Email (optional)" type="email" hint="When set, only this address can accept." testid="invite-email" />
          <${Select} form=${f} name="role" label="Role" options=${[["member", "Member — documents, chat, conversations"], ["admin", "Admin — also agents, settings, members"]]} testid="invite-role" />
          <${Input} form=${f} name="expiresInDays" label="Expires after (days)" type="number" min="1" max="90" />
        </div>
        <div class="form-actions"><${Button} type="submit" variant="primary" busy=${f.busy} testid="invite-submit">Create invitation</${Button}></div>
      </form>
      ${created && html`<div data-testid="invite-created">
        <${SecretOnce} label="Invitation link — send it to the person" secret=${link} testid="invite-link" />
        <${SecretOnce} label="Invitation token" secret=${created.token} testid="invite-token" />
      </div>`}
    </${Card}>
    <${Card} title="Invitations" actions=${html`<${Select} label="Status" name="status" value=${status} className="field-inline"
      options=${[["", "All"], ["pending", "Pending"], ["accepted", "Accepted"], ["revoked", "Revoked"], ["expired", "Expired"]]} onChange=${(e) => setQuery({ status: e.currentTarget.value })} />`}>
      <${ErrorBox} error=${res.error} retry=${res.reload} />
      ${res.loading && !res.data ? html`<${Loading} />` : html`<${Table} caption="Invitations" rowTestId="invitation-row" rows=${items} columns=${[
        { label: "Email", render: (i) => i.email || html`<span class="muted">anyone with the link</span>` },
        { label: "Role", render: (i) => i.role },
        { label: "Status", render: (i) => html`<${Badge}>${i.status}</${Badge}>` },
        { label: "Created", render: (i) => fmtDate(i.createdAt) },
        { label: "Expires", render: (i) => fmtDate(i.expiresAt) },
        { label: "", render: (i) => i.status === "pending" && html`<${Button} small variant="danger" onClick=${() => revoke(i)}>Revoke</${Button}>` },
      ]} empty=${html`<${Empty} title="No invitations">Invite your colleagues above.</${Empty}>`} />`}
    </${Card}>
  </div>`;
}
