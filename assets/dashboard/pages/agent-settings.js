// Agent settings: instructions, retrieval on/off and the retrieval skill settings (with the
// inherited defaults shown), chat model override, handoff on a retrieval miss, surfaces, source
// scope and the assistant logo.

import { useState } from "../../vendor/hooks.mjs";
import { del, get, put, upload } from "../api.js";
import { can } from "../session.js";
import {
  Button, Card, Checkbox, ErrorBox, FormError, Input, Loading, Select, TextArea, fieldError, fmtBytes, html, toast, useAsync, useForm, useId,
} from "../ui.js";

const PROVIDERS = [["", "Inherit (workspace model)"], ["openai", "OpenAI"], ["openai-compatible", "OpenAI-compatible"], ["claude", "Claude"], ["gemini", "Gemini"], ["local", "Local GGUF"], ["builtin", "Built-in extractive"]];

/** The retrieval keys an agent or a retrieve skill can override, with their kinds. */
export const RETRIEVAL_FIELDS = [
  ["retrievalStrategy", "select", "Strategy", ["fixed", "reasoning", "auto"]],
  ["vectorTopK", "number", "Vector candidates (top K)", [1, 300]],
  ["queryRewriteEnabled", "bool", "Query rewrite"],
  ["semanticRewriteInstructions", "text", "Semantic rewrite instructions"],
  ["lexicalRewriteInstructions", "text", "Keyword rewrite instructions"],
  ["rerankEnabled", "bool", "Rerank"],
  ["rerankTopK", "number", "Chunks kept after rerank", [1, 100]],
  ["suggestedQuestionsEnabled", "bool", "Suggested questions"],
  ["suggestedQuestionsCount", "number", "Suggested questions count", [1, 4]],
  ["temporalBoostUpcomingEnabled", "bool", "Boost upcoming dates"],
  ["temporalDeterministicSortEnabled", "bool", "Sort dated facts deterministically"],
  ["temporalStructuredLookupEnabled", "bool", "Structured date lookup"],
];

function show(v) { return v === undefined || v === null ? "—" : typeof v === "boolean" ? (v ? "on" : "off") : v === "" ? "(empty)" : String(v); }

/**
 * A form over retrieval overrides: every field empty = inherited (the inherited value is shown).
 * `value` is the overrides object; `onChange(next)`; `error` is the last ApiError; `prefix` the
 * field path the API uses for these keys (e.g. "skillSettings.retrieval.answer" or "config").
 */
export function RetrievalConfig({ cap, value, onChange, error, prefix, disabled }) {
  const inherited = (cap && cap.inheritedDefaults) || {};
  const help = (cap && cap.fieldHelp) || {};
  const hints = (cap && cap.dependencyHints) || {};
  const set = (k, v) => {
    const next = { ...value };
    if (v === "" || v === undefined) delete next[k]; else next[k] = v;
    onChange(next);
  };
  return html`<div class="form-grid retrieval-config">
    ${RETRIEVAL_FIELDS.map(([k, kind, label, extra]) => {
      const inh = k in inherited ? `Inherited: ${show(inherited[k])}` : "Inherited from the system default";
      const hint = [help[k], hints[k], inh].filter(Boolean).join(" · ");
      const err = fieldError(error, `${prefix}.${k}`) || fieldError(error, k);
      const v = value[k];
      if (kind === "bool") {
        return html`<${Select} label=${label} name=${k} hint=${hint} error=${err} disabled=${disabled} testid=${"rc-" + k}
          value=${v === undefined ? "" : v ? "on" : "off"} options=${[["", "Inherit"], ["on", "On"], ["off", "Off"]]}
          onChange=${(e) => set(k, e.currentTarget.value === "" ? "" : e.currentTarget.value === "on")} />`;
      }
      if (kind === "select") {
        return html`<${Select} label=${label} name=${k} hint=${hint} error=${err} disabled=${disabled} testid=${"rc-" + k}
          value=${v ?? ""} options=${[["", "Inherit"], ...extra]} onChange=${(e) => set(k, e.currentTarget.value)} />`;
      }
      if (kind === "number") {
        return html`<${Input} label=${label} name=${k} type="number" min=${extra[0]} max=${extra[1]} hint=${hint} error=${err} disabled=${disabled}
          placeholder=${show(inherited[k])} value=${v ?? ""} testid=${"rc-" + k}
          onInput=${(e) => set(k, e.currentTarget.value === "" ? "" : Number(e.currentTarget.value))} />`;
      }
      return html`<${TextArea} label=${label} name=${k} rows="2" hint=${hint} error=${err} disabled=${disabled} value=${v ?? ""}
        placeholder="Inherit (the default instruction)" onInput=${(e) => set(k, e.currentTarget.value)} />`;
    })}
  </div>`;
}

function fromAgent(a) {
  const s = a.surfaceSettings || {};
  const we = s.websiteEmbed || {};
  return {
    name: a.name,
    customInstruction: a.customInstruction || "",
    greetingInstruction: a.greetingInstruction || "",
    assistantDefaultLocale: a.assistantDefaultLocale || "",
    retrievalEnabled: !!a.retrievalEnabled,
    handoffOnRetrievalMiss: !!a.handoffOnRetrievalMiss,
    contactRequestsEnabled: !!a.contactRequestsEnabled,
    suggestedQuestionsEnabled: !!a.suggestedQuestionsEnabled,
    citationDisplayEnabled: !!a.citationDisplayEnabled,
    provider: (a.chatModelOverride && a.chatModelOverride.provider) || "",
    model: (a.chatModelOverride && a.chatModelOverride.model) || "",
    authenticatedChat: !!(s.authenticatedChat && s.authenticatedChat.enabled),
    anonymousChat: !!(s.anonymousChat && s.anonymousChat.enabled),
    websiteEmbed: !!we.enabled,
    allowedOrigins: (we.allowedOrigins || []).join("\n"),
    launcherLabel: we.launcherLabel || "",
    launcherPosition: we.launcherPosition || "bottom-right",
    scopeMode: (a.sourceScope && a.sourceScope.mode) || "all",
    scopeIds: (a.sourceScope && a.sourceScope.sourceIds) || [],
    contactEmails: ((a.contactRequestDelivery && a.contactRequestDelivery.recipientEmails) || []).join("\n"),
    contactWebhook: (a.contactRequestDelivery && a.contactRequestDelivery.webhook && a.contactRequestDelivery.webhook.url) || "",
  };
}

export default function AgentSettings({ agent, onChanged }) {
  const manage = can("workspace.agents.manage");
  const caps = useAsync(() => get(`/agents/${agent.id}/skill-capabilities`), [agent.id]);
  const sources = useAsync(() => get("/document/sources", { limit: 200 }), []);
  const f = useForm(fromAgent(agent));
  const [rc, setRc] = useState((agent.skillSettings && agent.skillSettings["retrieval.answer"]) || {});
  const retrieve = caps.data && (caps.data.capabilities || []).find((c) => c.id === "retrieve");
  const v = f.values;

  const save = f.submit(async () => {
    const body = {
      name: v.name,
      customInstruction: v.customInstruction,
      greetingInstruction: v.greetingInstruction,
      assistantDefaultLocale: v.assistantDefaultLocale.trim() || null,
      retrievalEnabled: v.retrievalEnabled,
      handoffOnRetrievalMiss: v.handoffOnRetrievalMiss,
      contactRequestsEnabled: v.contactRequestsEnabled,
      suggestedQuestionsEnabled: v.suggestedQuestionsEnabled,
      citationDisplayEnabled: v.citationDisplayEnabled,
      chatModelOverride: v.provider ? { provider: v.provider, model: v.model.trim() } : null,
      surfaceSettings: {
        authenticatedChat: { enabled: v.authenticatedChat },
        anonymousChat: { enabled: v.anonymousChat },
        websiteEmbed: {
          enabled: v.websiteEmbed,
          allowedOrigins: v.allowedOrigins.split(/\s+/).map((x) => x.trim()).filter(Boolean),
          launcherLabel: v.launcherLabel,
          launcherPosition: v.launcherPosition,
        },
      },
      sourceScope: v.scopeMode === "all" ? { mode: "all" } : { mode: "selected", sourceIds: v.scopeIds },
      skillSettings: { ...(agent.skillSettings || {}), "retrieval.answer": rc },
      contactRequestDelivery: {
        recipientEmails: v.contactEmails.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean),
        webhook: v.contactWebhook.trim() ? { url: v.contactWebhook.trim() } : null,
      },
    };
    await put("/agents/" + agent.id, body);
    toast("Settings saved to the draft. Publish to make them live.");
    onChanged();
  });

  const err = f.error;
  const fe = (name) => fieldError(err, name);
  return html`<form onSubmit=${save} novalidate class="stack" data-testid="agent-settings-form">
    <${FormError} error=${err} fields=${["name", "customInstruction", "greetingInstruction", "assistantDefaultLocale", "chatModelOverride", "surfaceSettings", "sourceScope", "skillSettings", "retrievalEnabled", "contactRequestDelivery"]} />
    <fieldset disabled=${!manage} class="plain">
    <div class="grid-2">
      <${Card} title="Behaviour">
        <${Input} form=${f} name="name" label="Name" testid="agent-settings-name" />
        <${TextArea} form=${f} name="customInstruction" label="Instructions" rows="6" maxlength="2000" testid="agent-instructions"
          hint=${`How the agent should answer (tone, scope). ${v.customInstruction.length}/2000 characters. Reference context variables as ctx.name.`} />
        <${Checkbox} form=${f} name="retrievalEnabled" label="Answer from documents (retrieval)" testid="agent-retrieval-enabled"
          hint="Off: the agent answers everything directly, without searching." />
        <${Checkbox} form=${f} name="handoffOnRetrievalMiss" label="Hand off to a person when nothing relevant is found" testid="agent-handoff"
          hint="The conversation becomes human-owned and waits in the takeover inbox." />
        <${Checkbox} form=${f} name="contactRequestsEnabled" label="Let visitors ask to be contacted" testid="agent-contact-requests"
          hint="Contact requests (name, email, message) are delivered like handoff notices." />
        <${TextArea} form=${f} name="contactEmails" label="Notify by email (handoffs and contact requests)" rows="2" errorField="contactRequestDelivery.recipientEmails"
          testid="agent-contact-emails" hint="Up to 5 addresses, one per line. Empty: the workspace owner. A contact_human notify skill, when the agent has one, takes precedence." />
        <${Input} form=${f} name="contactWebhook" label="Notify by webhook (optional)" type="url" errorField="contactRequestDelivery.webhook.url"
          testid="agent-contact-webhook" placeholder="https://hooks.example.com/steward" hint="Receives the handoff notice as JSON with an Idempotency-Key; see the delivery log." />
        <${Checkbox} form=${f} name="suggestedQuestionsEnabled" label="Offer suggested follow-up questions" />
        <${Checkbox} form=${f} name="citationDisplayEnabled" label="Show citations to visitors" />
      </${Card}>
      <${Card} title="Model and greeting">
        <${Select} form=${f} name="provider" label="Chat model override" options=${PROVIDERS} errorField="chatModelOverride" testid="agent-model-provider"
          hint="Only for composing this agent's answers. The provider must be usable (a key or a local model)." />
        ${v.provider && html`<${Input} form=${f} name="model" label="Model id" errorField="chatModelOverride.model" placeholder="e.g. gpt-4o-mini" />`}
        <${TextArea} form=${f} name="greetingInstruction" label="Greeting instruction" rows="2" maxlength="200" />
        <${Input} form=${f} name="assistantDefaultLocale" label="Default language (tag)" placeholder="e.g. en, de-CH" />
        <${LogoEditor} agent=${agent} onChanged=${onChanged} manage=${manage} />
      </${Card}>
    </div>
    <${Card} title="Retrieval settings" testid="agent-retrieval-settings">
      <p class="muted">Leave a field on “Inherit” to follow the system default (shown under each field). Saving stores only what you override.</p>
      ${caps.error ? html`<${ErrorBox} error=${caps.error} />` : !retrieve ? html`<${Loading} />`
        : html`<${RetrievalConfig} cap=${retrieve} value=${rc} onChange=${setRc} error=${err} prefix="skillSettings.retrieval.answer" disabled=${!manage} />`}
    </${Card}>
    <div class="grid-2">
      <${Card} title="Surfaces">
        <${Checkbox} form=${f} name="authenticatedChat" label="Authenticated chat (REST API)" errorField="surfaceSettings.authenticatedChat" />
        <${Checkbox} form=${f} name="anonymousChat" label="Anonymous public chat" errorField="surfaceSettings.anonymousChat" />
        <${Checkbox} form=${f} name="websiteEmbed" label="Website embed" errorField="surfaceSettings.websiteEmbed.enabled" />
        ${v.websiteEmbed && html`
          <${TextArea} form=${f} name="allowedOrigins" label="Allowed origins (one per line)" rows="3" errorField="surfaceSettings.websiteEmbed.allowedOrigins"
            placeholder="https://www.example.com" hint="Up to 20 origins." />
          <${Input} form=${f} name="launcherLabel" label="Launcher label" errorField="surfaceSettings.websiteEmbed.launcherLabel" />
          <${Select} form=${f} name="launcherPosition" label="Launcher position" options=${["bottom-right", "bottom-left"]} errorField="surfaceSettings.websiteEmbed.launcherPosition" />`}
      </${Card}>
      <${Card} title="Source scope">
        <fieldset class="mode-group">
          <legend>Which sources the agent searches</legend>
          <label><input type="radio" name="scopeMode" checked=${v.scopeMode === "all"} onChange=${() => f.set("scopeMode", "all")} /> All sources</label>
          <label><input type="radio" name="scopeMode" checked=${v.scopeMode === "selected"} onChange=${() => f.set("scopeMode", "selected")} /> Selected sources</label>
        </fieldset>
        ${v.scopeMode === "selected" && html`<div>
          ${((sources.data && sources.data.sources) || []).map((s) => html`<${Checkbox} name=${"src-" + s.id} label=${`${s.name} (${s.documentCount} documents)`}
            checked=${v.scopeIds.includes(s.id)} onChange=${(on) => f.set("scopeIds", on ? [...v.scopeIds, s.id] : v.scopeIds.filter((x) => x !== s.id))} />`)}
          ${fe("sourceScope") && html`<p class="field-error" role="alert">${fe("sourceScope")}</p>`}
        </div>`}
      </${Card}>
    </div>
    </fieldset>
    ${manage && html`<div class="form-actions sticky-actions">
      <${Button} onClick=${() => { f.setValues(fromAgent(agent)); setRc((agent.skillSettings && agent.skillSettings["retrieval.answer"]) || {}); f.setError(null); }}>Reset</${Button}>
      <${Button} type="submit" variant="primary" busy=${f.busy} testid="agent-settings-save">Save to draft</${Button}>
    </div>`}
  </form>`;
}

function LogoEditor({ agent, onChanged, manage }) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState(null);
  const id = useId("logo");
  const logo = agent.logo;
  const pick = async (e) => {
    const file = e.currentTarget.files[0];
    e.currentTarget.value = "";
    if (!file) return;
    const fd = new FormData();
    fd.append("file", file, file.name);
    setBusy(true);
    setErr(null);
    try { await upload(`/agents/${agent.id}/assistant-logo`, fd).promise; toast("Logo uploaded."); onChanged(); } catch (x) { setErr(x.message); } finally { setBusy(false); }
  };
  const remove = async () => {
    try { await del(`/agents/${agent.id}/assistant-logo`); toast("Logo removed."); onChanged(); } catch (x) { setErr(x.message); }
  };
  return html`<div class="field">
    <span class="label-like">Assistant logo</span>
    <div class="row">
      ${logo ? html`<img class="logo-preview" src=${logo.url + "?v=" + encodeURIComponent(agent.updatedAt)} alt="Current logo" width="48" height="48" data-testid="agent-logo" />
        <span class="muted small">${logo.filename || logo.mimeType} · ${fmtBytes(logo.sizeBytes)}</span>` : html`<span class="muted">No logo.</span>`}
      ${manage && html`<label class="btn btn-small" for=${id}>${busy ? "Uploading…" : logo ? "Replace" : "Upload"}</label>
        <input id=${id} class="sr-only-input" type="file" accept="image/png,image/jpeg,image/webp,image/svg+xml" onChange=${pick} data-testid="agent-logo-input" />
        ${logo && html`<${Button} small variant="ghost" onClick=${remove}>Remove</${Button}>`}`}
    </div>
    <p class="hint">PNG, JPEG, WebP or SVG, at most 512 KB.</p>
    ${err && html`<p class="field-error" role="alert">${err}</p>`}
  </div>`;
}
