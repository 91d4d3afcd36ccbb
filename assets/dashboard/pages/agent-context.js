// The agent's context variables: which catalog variables it uses (enablement), where their
// values come from (pushed or a resolver skill) and how they surface to the model.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, put } from "../api.js";
import { can } from "../session.js";
import { Badge, Button, Card, Empty, ErrorBox, Loading, Select, Table, html, toast, useAsync } from "../ui.js";

const SURFACING = [["always", "Always (in every turn's instructions)"], ["on_reference", "When referenced (ctx.name or {{name}})"], ["operator_only", "Operator only (never shown to the model)"]];

export default function AgentContext({ agent, onChanged }) {
  const manage = can("workspace.agents.manage");
  const res = useAsync(() => Promise.all([
    get("/context-variables"), get(`/agents/${agent.id}/context-variables`), get(`/agents/${agent.id}/skills`),
  ]), [agent.id]);
  const [busy, setBusy] = useState(null);
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!res.data) return html`<${Loading} />`;
  const catalog = res.data[0].contextVariables || [];
  const enabled = new Map((res.data[1].contextVariables || []).map((e) => [e.contextVariableId, e]));
  const skills = (res.data[2].skills || []).filter((s) => s.enabled);

  const save = async (v, patchBody) => {
    const cur = enabled.get(v.id);
    const body = { source: cur ? cur.source : "pushed", surfacing: cur ? cur.surfacing : v.defaultSurfacing, enabled: cur ? cur.enabled : true, ...patchBody };
    if (body.source === "resolver" && !body.resolverSkillId) body.resolverSkillId = (cur && cur.resolverSkillId) || (skills[0] && skills[0].id) || null;
    if (body.source !== "resolver") delete body.resolverSkillId;
    setBusy(v.id);
    try { await put(`/agents/${agent.id}/context-variables/${v.id}`, body); res.reload(); onChanged(); } catch (e) { toast(e.message, "error"); } finally { setBusy(null); }
  };
  const remove = async (v) => {
    setBusy(v.id);
    try { await del(`/agents/${agent.id}/context-variables/${v.id}`); toast(`${v.name} is no longer used by this agent.`); res.reload(); onChanged(); } catch (e) { toast(e.message, "error"); } finally { setBusy(null); }
  };

  return html`<${Card} title="Context variables" actions=${html`<a href="/app/context-variables" class="btn btn-small">Manage the catalog and values</a>`}>
    <p class="muted">Facts about the visitor or the account (plan, region, order) that the agent may use. Values are resolved per turn, most specific first: session → customer → agent → workspace. Sensitive values are never shown here.</p>
    <${Table} caption="Context variables of the agent" rowTestId="agent-cv-row" rows=${catalog} columns=${[
      { label: "Variable", render: (v) => html`<code>${v.name}</code>${v.sensitivity === "sensitive" ? html` <${Badge} tone="amber">sensitive</${Badge}>` : ""}<div class="muted small">${v.description}</div>` },
      { label: "Used by agent", render: (v) => {
        const e = enabled.get(v.id);
        return manage ? html`<${Select} label=${"Use " + v.name} name="use" className="field-inline sr-label" value=${!e ? "no" : e.enabled ? "yes" : "off"} disabled=${busy === v.id}
          options=${[["no", "Not used"], ["yes", "Enabled"], ["off", "Disabled"]]}
          onChange=${(ev) => (ev.currentTarget.value === "no" ? remove(v) : save(v, { enabled: ev.currentTarget.value === "yes" }))} />`
          : e ? (e.enabled ? "enabled" : "disabled") : "not used";
      } },
      { label: "Source", render: (v) => {
        const e = enabled.get(v.id);
        if (!e) return "—";
        return manage ? html`<${Select} label=${"Source of " + v.name} name="source" className="field-inline sr-label" value=${e.source === "resolver" ? "resolver:" + (e.resolverSkillId || "") : "pushed"}
          options=${[["pushed", "Pushed (stored values)"], ...skills.map((s) => ["resolver:" + s.id, "Resolved by #" + s.name])]}
          onChange=${(ev) => { const x = ev.currentTarget.value; save(v, x === "pushed" ? { source: "pushed" } : { source: "resolver", resolverSkillId: x.slice(9) }); }} />`
          : e.source;
      } },
      { label: "Surfacing", render: (v) => {
        const e = enabled.get(v.id);
        if (!e) return html`<span class="muted small">default: ${v.defaultSurfacing}</span>`;
        return manage ? html`<${Select} label=${"Surfacing of " + v.name} name="surfacing" className="field-inline sr-label" value=${e.surfacing} options=${SURFACING}
          onChange=${(ev) => save(v, { surfacing: ev.currentTarget.value })} />` : e.surfacing;
      } },
    ]} empty=${html`<${Empty} title="The catalog is empty">Define variables in the <a href="/app/context-variables">context variable catalog</a>, then enable them here.</${Empty}>`} />
  </${Card}>`;
}
