// Service credentials: API keys of the current workspace for servers and integrations.

import { PageHeader, html } from "../ui.js";
import { CredentialManager } from "./tokens.js";

const WORKSPACE_PERMISSIONS = ["workspace.agents.read", "workspace.agents.manage", "workspace.documents.read", "workspace.documents.manage",
  "workspace.retrieval.query", "workspace.chat", "workspace.conversations.read", "workspace.conversation.takeover", "workspace.settings.read", "workspace.settings.manage"];

export default function ServiceCredentials() {
  return html`<div class="page">
    <${PageHeader} title="Service credentials" subtitle="Keys for servers and integrations, bound to the current workspace. Choose only the permissions they need." />
    <${CredentialManager} path="/service-credentials" listKey="credentials" title="Credentials of this workspace" noun="service credential"
      permissions=${WORKSPACE_PERMISSIONS} requirePermissions
      hint="The secret (stw_svc_…) is shown once. Send it as Authorization: Bearer <secret>." />
  </div>`;
}
