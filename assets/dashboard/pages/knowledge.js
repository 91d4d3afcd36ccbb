// The workspace's knowledge index: the language its text is analyzed in, the embedding model its
// vectors come from (a change re-embeds every chunk in the background: the cost is named before
// it is confirmed, and the progress shows live), and how long search history is kept.

import { useState } from "../../vendor/hooks.mjs";
import { get, put } from "../api.js";
import { can } from "../session.js";
import { Badge, Button, Card, ErrorBox, FormError, Input, Loading, Meta, PageHeader, Progress, Select, confirm, fmtNum, html, toast, useAsync, useForm, usePoll } from "../ui.js";

const LANGS = {
  en: "English", de: "German", fr: "French", es: "Spanish", pt: "Portuguese", it: "Italian", nl: "Dutch",
  sv: "Swedish", no: "Norwegian", da: "Danish", fi: "Finnish", hu: "Hungarian", ru: "Russian", ro: "Romanian",
  tr: "Turkish", el: "Greek", ar: "Arabic", ta: "Tamil", other: "Another language (words, no stemming)",
};

/** "about 3 minutes" from seconds. */
function duration(s) {
  if (s < 90) { const n = Math.max(1, Math.round(s)); return `about ${n} second${n === 1 ? "" : "s"}`; }
  if (s < 5400) return `about ${Math.round(s / 60)} minutes`;
  return `about ${(s / 3600).toFixed(1)} hours`;
}

export default function Knowledge() {
  const res = useAsync(() => get("/settings/knowledge"), []);
  if (res.error) return html`<${ErrorBox} error=${res.error} retry=${res.reload} />`;
  if (!res.data) return html`<${Loading} />`;
  return html`<${Form} initial=${res.data} onSaved=${res.reload} />`;
}

function Form({ initial, onSaved }) {
  const manage = can("workspace.settings.manage");
  const [k, setK] = useState(initial);
  const f = useForm({
    language: initial.language,
    embeddingModel: initial.embeddingModel || "",
    retentionDays: initial.searchHistory.retentionDays,
    maxEntries: initial.searchHistory.maxEntries,
  });
  const reembedding = k.index.state === "reembedding";
  usePoll(async () => setK(await get("/settings/knowledge")), 1500, reembedding);
  const v = f.values;
  const chosen = v.embeddingModel || null;
  const save = f.submit(async (x) => {
    const body = {
      language: x.language,
      embeddingModel: x.embeddingModel || null,
      searchHistory: { retentionDays: Number(x.retentionDays), maxEntries: Number(x.maxEntries) },
    };
    // a change of model (chosen, or the language's default) re-embeds everything: name the cost first
    const target = x.embeddingModel || (x.language === "en" ? "all-minilm-l6-v2" : k.models.find((m) => m.id === "multilingual-e5-small" && m.installed) ? "multilingual-e5-small" : "all-minilm-l6-v2");
    const model = k.models.find((m) => m.id === target);
    if (model && target !== k.effectiveModel && k.index.chunks > 0) {
      const ok = await confirm({
        title: `Switch to ${model.name}?`,
        message: `Every chunk of this workspace (${fmtNum(k.index.chunks)}) is embedded again with ${model.id}: ${duration(model.reembedEstimateSeconds)} of background work on this server. Search keeps answering with the current model until the new vectors are complete, then switches over at once.`,
        confirmLabel: "Switch and re-embed",
      });
      if (!ok) return;
    }
    const r = await put("/settings/knowledge", body);
    setK(r);
    toast(r.index.state === "reembedding" ? "Saved. Re-embedding started." : "Knowledge settings saved.");
    onSaved();
  });
  const progress = k.index.reembedding;
  return html`<div class="page">
    <${PageHeader} title="Knowledge index" subtitle="The language of this workspace's documents and the embedding model its search uses." />
    <${Card} title="Index now" testid="knowledge-index">
      <${Meta} items=${[
        ["Embedding model", k.index.model],
        ["Sequence limit", `${k.index.maxTokens} tokens`],
        ["Chunks", fmtNum(k.index.chunks)],
        ["State", html`<${Badge} tone=${reembedding ? "amber" : "green"} testid="knowledge-state">${reembedding ? "re-embedding" : "ready"}</${Badge}>`],
      ]} />
      ${progress && html`<div data-testid="knowledge-progress">
        <p>Re-embedding with <strong>${progress.toModel}</strong>: ${fmtNum(progress.done)} of ${fmtNum(progress.total)} chunks. Search answers with the current model until it is complete.</p>
        <${Progress} value=${progress.total ? progress.done / progress.total : 1} label="Re-embedding progress" />
      </div>`}
    </${Card}>
    <form onSubmit=${save} novalidate>
      <fieldset disabled=${!manage} class="plain"><${Card} title="Language and model">
        <${FormError} error=${f.error} fields=${["language", "embeddingModel", "searchHistory.retentionDays", "searchHistory.maxEntries"]} />
        <${Select} form=${f} name="language" label="Language of the documents" testid="knowledge-language"
          hint="Keyword search stems and drops stop words for this language. English keeps the faster English model; other languages use the multilingual model when it is installed."
          options=${k.languages.map((l) => [l, LANGS[l] || l])} />
        <${Select} form=${f} name="embeddingModel" label="Embedding model" testid="knowledge-model"
          hint=${chosen ? "" : `Default for the language: ${k.effectiveModel}.`}
          options=${[["", "Default for the language"], ...k.models.map((m) => [m.id, `${m.name}${m.installed ? "" : " — not installed"} · cost ×${m.relativeCost}`])]} />
        <div class="form-grid">
          <${Input} form=${f} name="retentionDays" label="Keep search history (days)" type="number" min="1" max="3650" hint="1–3650; default 90." errorField="searchHistory.retentionDays" />
          <${Input} form=${f} name="maxEntries" label="Keep at most (searches)" type="number" min="1" max="1000000" hint="Default 10,000. Older searches are deleted daily." errorField="searchHistory.maxEntries" />
        </div>
        ${manage && html`<div class="form-actions"><${Button} type="submit" variant="primary" busy=${f.busy} testid="knowledge-save">Save</${Button}></div>`}
      </${Card}></fieldset>
    </form>
  </div>`;
}
