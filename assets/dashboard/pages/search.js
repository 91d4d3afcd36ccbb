// Search playground: query, mode, metadata filter, results with highlighted snippets and scores,
// the retrieval trace (includeDebug), and the search history with exact replay.

import { useState } from "../../vendor/hooks.mjs";
import { get, post } from "../api.js";
import { setQuery } from "../router.js";
import {
  Badge, Button, Card, Checkbox, Empty, ErrorBox, FormError, Highlighted, Input, Loading, Meta, PageHeader, Pager, Table, TextArea,
  fmtDate, fmtNum, html, useForm, usePager,
} from "../ui.js";

const MODES = [["hybrid", "Hybrid"], ["bm25", "BM25 (keywords)"], ["vector", "Vectors (meaning)"]];

export default function Search({ query }) {
  const f = useForm({ query: query.q || "", mode: "hybrid", limit: "10", metadataFilter: "", includeDebug: true });
  const [result, setResult] = useState(null);
  const [replayed, setReplayed] = useState(false);
  const history = usePager((cursor) => get("/document/search/history", { cursor, limit: 10 }), "searches", []);

  const run = f.submit(async (v) => {
    const body = { query: v.query, mode: v.mode, limit: Number(v.limit) || 10, includeDebug: !!v.includeDebug };
    if (v.metadataFilter.trim()) {
      let parsed;
      try { parsed = JSON.parse(v.metadataFilter); } catch (e) {
        const err = new Error("The filter is not valid JSON: " + e.message);
        err.field = "metadataFilter";
        throw err;
      }
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
        const err = new Error("The filter must be a JSON object, e.g. {\"category\": \"policy\"}.");
        err.field = "metadataFilter";
        throw err;
      }
      body.metadataFilter = parsed;
    }
    const r = await post("/document/search", body);
    setResult(r);
    setReplayed(false);
    setQuery({ q: v.query });
    history.first();
    history.reload();
  });

  const replay = async (s) => {
    const r = await get("/document/search/history/" + s.searchId);
    setResult(r.search ? { ...r.search, results: r.results || r.search.results } : r);
    setReplayed(true);
  };
  const reuse = (s) => f.setValues((v) => ({ ...v, query: s.query, mode: s.mode || "hybrid", metadataFilter: s.metadataFilter ? JSON.stringify(s.metadataFilter, null, 2) : "" }));

  return html`<div class="page">
    <${PageHeader} title="Search playground" subtitle="Try how retrieval ranks your documents: the same search your agents run before answering." />
    <${Card}>
      <form onSubmit=${run} novalidate role="search" aria-label="Search documents">
        <${FormError} error=${f.error} fields=${["query", "metadataFilter", "mode", "limit"]} />
        <div class="row search-row">
          <${Input} form=${f} name="query" label="Query" type="search" required testid="search-query" className="grow" placeholder="e.g. how long do refunds take" />
          <${Button} type="submit" variant="primary" busy=${f.busy} testid="search-submit">Search</${Button}>
        </div>
        <fieldset class="mode-group">
          <legend>Mode</legend>
          ${MODES.map(([v, l]) => html`<label><input type="radio" name="mode" value=${v} checked=${f.values.mode === v}
            onChange=${() => f.set("mode", v)} data-testid=${"search-mode-" + v} /> ${l}</label>`)}
        </fieldset>
        <div class="form-grid">
          <${TextArea} form=${f} name="metadataFilter" label="Metadata filter (JSON, optional)" rows="3" testid="search-filter"
            placeholder='{"category": "policy", "year": {"$gte": 2024}}'
            hint=${html`Operators: $eq $ne $in $nin $gt $gte $lt $lte $exists, and $and / $or / $not.`} />
          <div>
            <${Input} form=${f} name="limit" label="Results" type="number" min="1" max="100" testid="search-limit" />
            <${Checkbox} form=${f} name="includeDebug" label="Show the retrieval trace" testid="search-debug" />
          </div>
        </div>
      </form>
    </${Card}>

    ${result && html`<${Results} r=${result} replayed=${replayed} />`}

    <${Card} title="History">
      <${ErrorBox} error=${history.error} retry=${history.reload} />
      ${history.loading && !history.data ? html`<${Loading} />` : html`<${Table} caption="Search history" rowTestId="search-history-row" rows=${history.items} rowKey=${(s) => s.searchId}
        columns=${[
          { label: "Query", render: (s) => html`<strong>${s.query}</strong>${s.previewTopTitles && s.previewTopTitles.length ? html`<div class="muted small">${s.previewTopTitles.join(" · ")}</div>` : ""}` },
          { label: "Mode", render: (s) => s.mode },
          { label: "Filter", render: (s) => (s.metadataFilter ? html`<code>${JSON.stringify(s.metadataFilter)}</code>` : "—") },
          { label: "Results", render: (s) => fmtNum(s.resultCount), className: "num" },
          { label: "When", render: (s) => fmtDate(s.createdAt), className: "nowrap" },
          { label: "Actions", render: (s) => html`<div class="row">
            <${Button} small onClick=${() => replay(s)} testid="search-replay">Replay</${Button}>
            <${Button} small variant="ghost" onClick=${() => reuse(s)}>Edit & rerun</${Button}></div>` },
        ]}
        empty=${html`<${Empty} title="No searches yet">Run a search above; every search is saved here with its exact results.</${Empty}>`} />`}
      <${Pager} pager=${history} label="searches" />
    </${Card}>
  </div>`;
}

function Results({ r, replayed }) {
  const results = r.results || [];
  return html`<${Card} title=${replayed ? "Replayed search" : "Results"} testid="search-results"
    actions=${html`<span class="muted" aria-live="polite">${fmtNum(results.length)} results${r.tookMs !== undefined ? ` · ${r.tookMs} ms` : ""} · ${r.mode}${replayed ? ` · saved ${fmtDate(r.createdAt)}` : ""}</span>`}>
    ${replayed && html`<p class="alert alert-info">Exactly the results this search returned when it ran, even if documents changed since.</p>`}
    ${results.length ? html`<ol class="list results">${results.map((x, i) => html`<li class="result" data-testid="search-result">
      <div class="result-head">
        <span class="muted">${i + 1}.</span>
        <a class="result-title" href=${`/app/documents/${x.documentId}?chunk=${x.chunkId}`} data-testid="search-result-link">${x.title || "(untitled)"}</a>
        <span class="score" data-testid="search-score" title="Score, comparable within this response only">score ${Number(x.score).toFixed(3)}</span>
        <span class="scorebar" aria-hidden="true"><progress max="1" value=${x.score}></progress></span>
        ${x.headingPath && x.headingPath.length ? html`<span class="muted small">${[].concat(x.headingPath).join(" › ")}</span>` : ""}
        ${x.page ? html`<${Badge} tone="gray">page ${x.page}</${Badge}>` : ""}
        ${x.sheet ? html`<${Badge} tone="gray">sheet ${x.sheet}</${Badge}>` : ""}
      </div>
      <${Highlighted} text=${x.snippet} />
    </li>`)}</ol>`
    : html`<${Empty} title="No results">No chunk matched. Try other words, another mode, or remove the metadata filter. Documents still processing are not searchable yet.</${Empty}>`}
    ${r.debug && html`<${Debug} debug=${r.debug} />`}
  </${Card}>`;
}

function Debug({ debug }) {
  const t = debug.timingsMs || {};
  return html`<details class="debug" open data-testid="search-trace">
    <summary><strong>Retrieval trace</strong></summary>
    <${Meta} items=${[
      ["Keyword candidates", fmtNum(debug.lexicalCandidates)], ["Vector candidates", fmtNum(debug.vectorCandidates)],
      ["Feedback documents", fmtNum(debug.feedbackDocuments)], ["Expansion terms", fmtNum(debug.expansionTerms)],
      ["Filtered documents", debug.filteredDocuments === null ? "no filter" : fmtNum(debug.filteredDocuments)],
    ]} />
    <${Table} caption="Stage timings" rowKey=${(x) => x[0]} rows=${Object.entries(t)} columns=${[
      { label: "Stage", render: (x) => x[0] },
      { label: "Milliseconds", render: (x) => Number(x[1]).toFixed(2), className: "num" },
    ]} />
  </details>`;
}
