// Agent bundles: "Export bundle" on an agent's page (downloads the agent's draft as one JSON file)
// and "Import bundle" on the agents list (a file → a new agent, then the import's state and what
// did not come across, each with what to do about it). Not a page of its own: agent.js and
// agents.js place these.

import { useState } from "../../vendor/hooks.mjs";
import { get, post } from "../api.js";
import { Badge, Button, Card, ErrorBox, Meta, html, toast, useId } from "../ui.js";

/** What to do about each kind of unresolved reference (docs/api.md, "Agent bundles"). */
export const TODO = {
  skill_target_unbound: "Bind the skill to its target (a destination or connection in this workspace), then enable it.",
  mcp_connection_unbound: "Reconnect the MCP server (its URL and credential) and its connection, then enable the skill.",
  skill_capability_unknown: "This server has no such capability: the skill was not created. Recreate it with a capability listed under Skills, if you still need it.",
  skill_config_not_portable: "Fill in the settings that stayed behind (recipients, URLs, bound inputs) on the skill; if the skill was not created, add it again.",
  document_source_unresolved: "Choose the sources to search: none are selected, so nothing is searched yet.",
  surface_credential_unbound: "Turn the surface back on in the agent's settings once its channel is set up in this workspace.",
  contact_delivery_unbound: "Set who receives contact requests (emails or a webhook); until then they go to the workspace owner.",
  asset_not_portable: "Upload the logo again in the agent's settings.",
  context_variable_missing: "Create the context variable in this workspace, then enable it on the agent.",
  resolver_skill_missing: "Add the resolver skill to the agent, then enable the variable with it.",
  routine_invalid: "Fix what the detail names (for example, create the webhook destination) and add the routine again.",
  directive_binding_unbound: "Add and enable the bound skill, then switch the directive on.",
};

/** A file name for an agent's bundle: its name in lowercase letters, digits and dashes. */
function fileName(name) {
  const slug = String(name || "").toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 60);
  return (slug || "agent") + ".bundle.json";
}

/** The "Export bundle" button: fetches the bundle and downloads it as a file. */
export function ExportBundleButton({ agent }) {
  const [busy, setBusy] = useState(false);
  const [file, setFile] = useState(null);
  const run = async () => {
    setBusy(true);
    try {
      const bundle = await get(`/agents/${agent.id}/bundle`);
      const blob = new Blob([JSON.stringify(bundle, null, 2) + "\n"], { type: "application/json" });
      if (file) URL.revokeObjectURL(file.url);
      const next = { url: URL.createObjectURL(blob), name: fileName(agent.name) };
      setFile(next);
      const a = document.createElement("a");
      a.href = next.url;
      a.download = next.name;
      document.body.appendChild(a);
      a.click();
      a.remove();
      toast(`Bundle of “${agent.name}” exported. Secrets, recipients and source choices stay here.`);
    } catch (e) {
      toast(e.message, "error");
    } finally {
      setBusy(false);
    }
  };
  return html`<span class="row">
    <${Button} onClick=${run} busy=${busy} testid="bundle-export">Export bundle</${Button}>
    ${file && html`<a class="small" href=${file.url} download=${file.name} data-testid="bundle-download">Download ${file.name} again</a>`}
  </span>`;
}

/** One unresolved reference: what did not come across, and what to do. */
/** What to do about one unresolved entry (an eval case naming documents has its own step). */
function todo(u) {
  if (u.element && u.element.startsWith("evalCases")) {
    return "Open the case in Evals and point its assertions at this workspace's documents.";
  }
  return TODO[u.kind] || "Review this part of the agent.";
}

function UnresolvedItem({ u }) {
  return html`<li data-testid="bundle-unresolved" data-kind=${u.kind}>
    <div class="row"><${Badge} tone="amber">${u.kind}</${Badge}> <code>${u.element}</code></div>
    <p class="muted small">${u.detail}</p>
    <p data-testid="bundle-todo">${todo(u)}</p>
  </li>`;
}

/** The result of an import: the job's state, counts and the unresolved list. */
function ImportResult({ job }) {
  const c = job.counts || {};
  const list = job.unresolved || [];
  return html`<div class="stack" data-testid="bundle-import-result" data-status=${job.status}>
    <div class="row">
      <span>Import</span> <${Badge} testid="bundle-import-status">${job.status}</${Badge}>
      ${job.replayed && html`<${Badge} tone="blue">replayed</${Badge}>`}
      ${job.agentId && job.status === "applied" && html`<a href=${"/app/agents/" + job.agentId} data-testid="bundle-import-agent">Open the imported agent</a>`}
    </div>
    <${Meta} items=${[
      ["Skills", c.skills], ["Routines", c.routines], ["Directives", c.directives], ["Context variables", c.contextVariables],
      ...(c.evalCases ? [["Eval cases", c.evalCases]] : []),
    ]} />
    ${c.evalCases > 0 && job.status === "applied" && html`<p class="muted">The agent's eval cases came too: run them from <a href="/app/evals">Evals</a> to check the imported agent at once.</p>`}
    ${job.status === "applied" && html`<p class="muted">The imported configuration is the new agent's draft: review what follows, then publish it from “Revisions & publish”.</p>`}
    ${list.length ? html`<div>
      <h3>Did not come across as it was (${list.length})</h3>
      <ul class="list" data-testid="bundle-unresolved-list">${list.map((u, i) => html`<${UnresolvedItem} key=${i} u=${u} />`)}</ul>
    </div>` : html`<p data-testid="bundle-all-resolved">Everything came across.</p>`}
  </div>`;
}

function newKey() {
  return (crypto.randomUUID && crypto.randomUUID()) || String(Date.now()) + Math.random().toString(16).slice(2);
}

/** The "Import bundle" card: pick a bundle file; it is imported as a new agent. */
export function ImportBundle({ onImported }) {
  const id = useId("bundle");
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(null);
  const [job, setJob] = useState(null);
  const [pending, setPending] = useState(null);

  const send = async (body) => {
    setBusy(true);
    setErr(null);
    try {
      const r = await post("/agents/bundle", body);
      setJob(r);
      setPending(null);
      toast(r.replayed ? "This bundle was already imported." : "Bundle imported as a new agent.");
      if (onImported) onImported(r);
    } catch (e) {
      setErr(e);
      // an interrupted earlier attempt was cleaned up: the same request can be sent again
      setPending(e.code === "agent_bundle_import_fenced" || e.code === "agent_bundle_import_in_progress" ? body : null);
    } finally {
      setBusy(false);
    }
  };
  const pick = async (e) => {
    const file = e.currentTarget.files[0];
    e.currentTarget.value = "";
    if (!file) return;
    setJob(null);
    let body;
    try {
      body = JSON.parse(await file.text());
    } catch {
      setErr({ message: `“${file.name}” is not a JSON bundle.`, code: "invalid_file" });
      return;
    }
    if (!body || typeof body !== "object" || Array.isArray(body)) {
      setErr({ message: `“${file.name}” is not a bundle (a JSON object).`, code: "invalid_file" });
      return;
    }
    // one key per file: sending it again (after a retryable refusal) cannot import twice
    await send({ ...body, idempotencyKey: body.idempotencyKey || newKey() });
  };

  return html`<${Card} title="Import an agent bundle" testid="bundle-import">
    <p class="muted">A bundle exported from an agent (“Export bundle” on its page) becomes a new agent here. Connections, secrets, recipients and source choices never travel: what needs doing is listed after the import.</p>
    <div class="row">
      <label class="btn" for=${id}>${busy ? "Importing…" : "Choose a bundle file"}</label>
      <input id=${id} class="sr-only-input" type="file" accept="application/json,.json" onChange=${pick} disabled=${busy} data-testid="bundle-import-input" />
      ${pending && html`<${Button} onClick=${() => send(pending)} busy=${busy} testid="bundle-import-retry">Try again</${Button}>`}
    </div>
    <div data-testid="bundle-import-error"><${ErrorBox} error=${err} /></div>
    ${job && html`<${ImportResult} job=${job} />`}
  </${Card}>`;
}
