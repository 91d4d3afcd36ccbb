// Your profile and personal access tokens.

import { session } from "../session.js";
import { Card, Meta, PageHeader, fmtDate, html } from "../ui.js";
import { CredentialManager } from "./tokens.js";

export default function Profile() {
  const me = session();
  return html`<div class="page">
    <${PageHeader} title="Profile & tokens" />
    <${Card} title="You"><${Meta} items=${[
      ["Name", me.user.name], ["Email", me.user.email], ["Role", me.role], ["Organization", me.organization && me.organization.name],
      ["Current workspace", me.workspace && me.workspace.name], ["Member since", fmtDate(me.user.createdAt)], ["Signed in via", me.authenticatedVia],
    ]} /></${Card}>
    <${CredentialManager} path="/account/tokens" listKey="tokens" title="Personal access tokens" noun="token" permissions=${me.permissions || []}
      hint="Tokens act as you, limited to your role at each request. The secret (stw_pat_…) is shown once." />
  </div>`;
}
