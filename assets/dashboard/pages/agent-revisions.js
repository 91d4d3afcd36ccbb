// Revisions: what the draft changes against the published revision, materializing a candidate,
// publishing (with stale-draft conflicts and unpublishable candidates explained), and the list.

import { useState } from "../../vendor/hooks.mjs";
import { get, post } from "../api.js";
import { can } from "../session.js";
import { Badge, Button, Card, Empty, ErrorBox, Loading, Meta, Table, fmtDate, html, toast, useAsync } from "../ui.js";

function newKey() {
  return (crypto.randomUUID && crypto.randomUUID()) || String(Date.now()) + Math.random().toString(16).slice(2);
}

export default function Revisions({ agent, state, onChanged }) {
  const manage = can("workspace.agents.manage");
  const list = useAsync(() => get(`/agents/${agent.id}/revisions`, { include: "published" }), [agent.id, state && state.draft && state.draft.generation]);
  const [candidate, setCandidate] = useState(null);
  const [published, setPublished] = useState(null);
  const [problem, setProblem] = useState(null);
  const [busy, setBusy] = useState(null);

  const review = async () => {
    setBusy("review");
    setProblem(null);
    try {
      const c = await post(`/agents/${agent.id}/revisions/candidates`, { expectedDraftGeneration: state.draft.generation });
      const full = await get(`/agents/${agent.id}/revisions/${c.id}`);
      setCandidate(full);
      if (state.publishedRevision) setPublished(await get(`/agents/${agent.id}/revisions/${state.publishedRevision.id}`));
      list.reload();
    } catch (e) {
      setProblem(e);
      if (e.code === "revision_conflict") onChanged();
    } finally { setBusy(null); }
  };

  const publish = async () => {
    setBusy("publish");
    setProblem(null);
    try {
      const r = await post(`/agents/${agent.id}/revisions/${candidate.id}/publish`, {
        expectedDraftGeneration: candidate.generation,
        expectedPublishedRevisionId: state.publishedRevision ? state.publishedRevision.id : null,
        idempotencyKey: newKey(),
      });
      toast(`Published ${r.label || "the draft"}. New conversations use it now.`);
      setCandidate(null);
      onChanged();
      list.reload();
    } catch (e) {
      setProblem(e);
    } finally { setBusy(null); }
  };

  const revisions = (list.data && (list.data.revisions || list.data.candidates)) || [];
  return html`<div class="stack">
    <${Card} title="Draft and published revision" testid="revision-state">
      ${!state ? html`<${Loading} />` : html`
        <${Meta} items=${[
          ["Status", html`<${Badge}>${state.status}</${Badge}>`],
          ["Published", state.publishedRevision ? `${state.publishedRevision.label} · ${fmtDate(state.publishedRevision.publishedAt)}` : "nothing yet"],
          ["Draft generation", state.draft.generation],
          ["Draft updated", fmtDate(state.draft.updatedAt)],
        ]} />
        <p class="muted">Edits go to the draft. Review the draft to freeze it into a candidate revision and see what it changes; publishing makes new conversations use it (running conversations keep their revision).</p>
        ${problem && html`<${PublishProblem} error=${problem} />`}
        ${manage && html`<div class="row">
          <${Button} variant=${candidate ? "secondary" : "primary"} onClick=${review} busy=${busy === "review"} testid="revision-review"
            disabled=${state.status === "published" && !candidate}>${candidate ? "Refresh review" : "Review draft changes"}</${Button}>
          ${candidate && html`<${Button} variant="primary" onClick=${publish} busy=${busy === "publish"} testid="revision-publish">Publish ${candidate.label.startsWith("Draft") ? "this draft" : candidate.label}</${Button}>`}
          ${state.status === "published" && !candidate && html`<span class="muted">The draft equals the published revision: nothing to publish.</span>`}
        </div>`}`}
    </${Card}>
    ${candidate && html`<${Changes} c=${candidate} published=${published} />`}
    <${Card} title="Revisions">
      <${ErrorBox} error=${list.error} retry=${list.reload} />
      <${Table} caption="Revisions" rowTestId="revision-row" rows=${revisions} columns=${[
        { label: "Revision", render: (r) => html`<strong>${r.label}</strong>` },
        { label: "Kind", render: (r) => html`<${Badge}>${r.kind}</${Badge}>${state && state.publishedRevision && state.publishedRevision.id === r.id ? html` <${Badge} tone="green">live</${Badge}>` : ""}` },
        { label: "Generation", render: (r) => r.generation, className: "num" },
        { label: "Created", render: (r) => fmtDate(r.createdAt), className: "nowrap" },
        { label: "Published", render: (r) => fmtDate(r.publishedAt), className: "nowrap" },
        { label: "", render: (r) => html`<a class="btn btn-small" href=${`/app/chat?agent=${agent.id}&target=${r.id}`}>Test</a>` },
      ]} empty=${html`<${Empty} title="No revisions yet" />`} />
    </${Card}>
  </div>`;
}

function PublishProblem({ error }) {
  const d = error.details || {};
  if (error.code === "revision_conflict") {
    return html`<div class="alert alert-warn" role="alert" data-testid="publish-conflict">
      <strong>The agent changed while you were reviewing.</strong> ${error.message}
      ${d.currentDraftGeneration !== undefined && html` The draft is now at generation ${d.currentDraftGeneration}.`}
      ${d.currentPublishedRevisionId !== undefined && html` Someone else may have published meanwhile.`}
      Review the draft again to include the latest changes, then publish.
    </div>`;
  }
  if (error.code === "revision_invalid") {
    return html`<div class="alert alert-error" role="alert" data-testid="publish-invalid">
      <strong>This draft cannot be published.</strong> ${error.message}
      <ul>${(d.errors || []).map((e) => html`<li>${typeof e === "string" ? e : `${e.path || e.field || ""} ${e.message || e.code || JSON.stringify(e)}`}</li>`)}</ul>
      Fix these in Settings (for example an unusable chat model override or a deleted source in the scope) and review again.
    </div>`;
  }
  return html`<${ErrorBox} error=${error} />`;
}

function Changes({ c, published }) {
  const sc = c.scopedChanges || {};
  const rows = [];
  const before = (published && published.snapshot && published.snapshot.settings) || {};
  const after = (c.snapshot && c.snapshot.settings) || {};
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (JSON.stringify(before[k]) !== JSON.stringify(after[k])) rows.push({ area: "Setting", name: k, change: "changed", before: before[k], after: after[k] });
  }
  if (published && published.snapshot && c.snapshot && published.snapshot.name !== c.snapshot.name) rows.push({ area: "Setting", name: "name", change: "changed", before: published.snapshot.name, after: c.snapshot.name });
  if (sc.customInstruction && sc.customInstruction.changed && !rows.some((r) => r.name === "customInstruction")) rows.push({ area: "Instructions", name: "customInstruction", change: "changed", before: sc.customInstruction.before, after: sc.customInstruction.after });
  if (sc.greeting && sc.greeting.changed) rows.push({ area: "Greeting", name: "greeting", change: "changed", before: sc.greeting.before, after: sc.greeting.after });
  for (const [area, key] of [["Directive", "directives"], ["Skill", "skills"], ["Context variable", "contextVariableEnablements"], ["Routine", "routines"]]) {
    for (const x of sc[key] || []) {
      const o = x.after || x.before || {};
      rows.push({ area, name: o.name || o.contextVariableId || x.id, change: x.change, before: x.before, after: x.after });
    }
  }
  const show = (v) => (v === undefined || v === null ? "—" : typeof v === "string" ? v || "(empty)" : JSON.stringify(v));
  return html`<${Card} title=${`What ${c.label} changes against the published revision`} testid="revision-changes">
    ${(c.dependencyWarnings || []).length > 0 && html`<div class="alert alert-warn"><strong>Warnings:</strong>
      <ul>${c.dependencyWarnings.map((w) => html`<li>${typeof w === "string" ? w : w.message || JSON.stringify(w)}</li>`)}</ul></div>`}
    <${Table} caption="Changes" rowKey=${(r, i) => i} rowTestId="revision-change" rows=${rows} columns=${[
      { label: "What", render: (r) => r.area },
      { label: "Name", render: (r) => html`<strong>${r.name}</strong>` },
      { label: "Change", render: (r) => html`<${Badge} tone=${r.change === "added" ? "green" : r.change === "removed" ? "red" : "amber"}>${r.change}</${Badge}>` },
      { label: "Before", render: (r) => html`<span class="diff diff-old small">${show(r.change === "added" ? null : r.before)}</span>` },
      { label: "After", render: (r) => html`<span class="diff diff-new small">${show(r.change === "removed" ? null : r.after)}</span>` },
    ]} empty=${html`<${Empty} title="No changes">The draft matches the published revision.</${Empty}>`} />
  </${Card}>`;
}
