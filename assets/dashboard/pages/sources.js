// Sources: where documents come from (uploads, the API, crawled websites, connectors), with
// their document counts, reprocessing, the enrichment override and deletion. A form starts a
// website crawl; each website source shows its latest crawl job live (polled every 2 s while a job
// is queued or processing, and not after the page is left): status, counters, failed and skipped
// pages with their reasons, pause / resume / recrawl, and the recrawl interval.

import { useEffect, useState } from "../../vendor/hooks.mjs";
import { del, get, patch, post } from "../api.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, Checkbox, Empty, ErrorBox, FormError, Input, Loading, Meta, PageHeader, Pager, Progress, Select, Table, TextArea,
  confirm, fmtDate, fmtNum, html, namesField, toast, useForm, usePager, usePoll,
} from "../ui.js";
import { StatusCell } from "./documents.js";

/** Job states that move on by themselves (the page polls while one is shown). */
const MOVING = new Set(["queued", "processing"]);
/** Job states the API counts as a crawl in progress (no second crawl or recrawl meanwhile). */
const IN_PROGRESS = new Set(["queued", "processing", "paused"]);
const STATUS_TONE = { queued: "blue", processing: "blue", paused: "amber", completed: "green", failed: "red" };
const POLL_MS = 2000;

const INTERVALS = [[0, "Off"], [6, "Every 6 hours"], [12, "Every 12 hours"], [24, "Daily"], [72, "Every 3 days"], [168, "Weekly"], [336, "Every 2 weeks"], [720, "Every 30 days"]];

const SKIP_REASONS = {
  robots_disallowed: "Blocked by robots.txt",
  noindex: "noindex in a meta robots tag",
  noindex_header: "noindex in the X-Robots-Tag header",
  empty: "No content",
  consent_only: "Only a cookie or consent notice",
  js_shell: "A JavaScript shell with no content",
  link_hub: "A link hub: used for discovery only",
  canonical_elsewhere: "Its canonical URL is another page",
  duplicate_content: "The same content as another page",
  too_large: "Larger than 500,000 characters",
  not_html: "Not an HTML page",
  redirect: "A redirect to another page of the site (followed)",
  redirect_outside_site: "Redirected outside the site",
  discovery_only: "Does not match the include patterns: used for discovery only",
};

const COUNTERS = [
  ["discovered", "Discovered"], ["fetched", "Fetched"], ["indexed", "Indexed"], ["unchanged", "Unchanged"],
  ["skipped", "Skipped"], ["failed", "Failed"], ["removed", "Removed"],
];

const FORM_FIELDS = ["url", "limit", "includeUrlPatterns", "excludeUrlPatterns", "preserveContentLinks", "recrawlIntervalHours"];
const LIST_ROWS = 10;

function intervalLabel(hours) {
  const h = Number(hours) || 0;
  const known = INTERVALS.find(([v]) => v === h);
  if (known) return known[1];
  return h === 1 ? "Every hour" : `Every ${h} hours`;
}

/** The interval choices, with `current` added when it is not one of them (set through the API). */
function intervalOptions(current) {
  const h = Number(current) || 0;
  const opts = INTERVALS.map(([v, l]) => [String(v), l]);
  if (h && !INTERVALS.some(([v]) => v === h)) opts.push([String(h), intervalLabel(h)]);
  return opts;
}

/** URL patterns typed one per line or comma-separated. */
function patterns(text) {
  return String(text || "").split(/[\n,]/).map((s) => s.trim()).filter(Boolean);
}

function plural(n, one, many) { return `${fmtNum(n)} ${Number(n) === 1 ? one : many}`; }

/** "4 s", "3 min", "1.5 h" between two timestamps (or until now). */
function took(from, to) {
  const a = Date.parse(from);
  const b = to ? Date.parse(to) : Date.now();
  if (isNaN(a) || isNaN(b)) return "";
  const s = Math.max(0, (b - a) / 1000);
  if (s < 90) return `${Math.max(1, Math.round(s))} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** A crawled page's address: a link when it is http(s), else text (never a script URL). */
function PageUrl({ url, className = "cr-url" }) {
  const u = String(url || "");
  if (/^https?:\/\//i.test(u)) return html`<a href=${u} class=${className} target="_blank" rel="noopener noreferrer">${u}</a>`;
  return html`<span class=${className}>${u || "—"}</span>`;
}

export default function Sources() {
  const manage = can("workspace.documents.manage");
  const pager = usePager((cursor) => get("/document/sources", { cursor, limit: 50 }), "sources", []);
  const [open, setOpen] = useState(null);
  const [busy, setBusy] = useState(null);
  // bumped by every change made here, so a form error about an earlier state goes away
  const [epoch, setEpoch] = useState(0);
  const sources = pager.items;
  const websites = sources.filter((s) => s.kind === "website");
  // poll while a crawl moves; usePoll stops when none does and when the page is left
  const moving = websites.some((s) => s.lastCrawl && MOVING.has(s.lastCrawl.status));
  usePoll(() => pager.reload(), POLL_MS, moving);

  /** Replaces one source in the list at once (the next load brings the rest). */
  const update = (id, fn) => pager.setData((d) => d && { ...d, sources: (d.sources || []).map((x) => (x.id === id ? fn(x) : x)) });

  const started = (r) => {
    pager.setData((d) => {
      const list = (d && d.sources) || [];
      const src = { ...r.source, lastCrawl: r.job };
      return { ...(d || {}), sources: list.some((x) => x.id === src.id) ? list.map((x) => (x.id === src.id ? { ...x, ...src } : x)) : [src, ...list] };
    });
    pager.reload();
  };
  const reprocess = async (s) => {
    setBusy(`${s.id}:reprocess`);
    try {
      const r = await post(`/document/sources/${s.id}/reprocess`);
      toast(r.status === "noop" ? "Nothing to reprocess." : `Queued ${r.queuedDocumentCount} documents; ${r.skippedDocumentCount} skipped (already queued or processing).`);
    } catch (e) { toast(e.message, "error"); } finally { setBusy(null); }
  };
  const control = async (s, action, done) => {
    setBusy(`${s.id}:${action}`);
    try {
      const r = await post(`/document/sources/${s.id}/${action}`);
      if (r && r.job) update(s.id, (x) => ({ ...x, lastCrawl: r.job }));
      setEpoch((n) => n + 1);
      toast(done);
    } catch (e) { toast(e.message, "error"); } finally { setBusy(null); pager.reload(); }
  };
  const setOverride = async (s, v) => {
    try { await patch(`/document/sources/${s.id}`, { documentEnrichmentOverride: v }); toast("Enrichment setting saved."); pager.reload(); } catch (e) { toast(e.message, "error"); }
  };
  const saveInterval = async (s, hours) => {
    const h = Number(hours) || 0;
    update(s.id, (x) => ({ ...x, config: { ...(x.config || {}), recrawlIntervalHours: h || null } }));
    try {
      await patch(`/document/sources/${s.id}`, { recrawlIntervalHours: h || null });
      toast(h ? `${s.name} is recrawled: ${intervalLabel(h).toLowerCase()}.` : `Automatic recrawl of ${s.name} is off.`);
    } catch (e) { toast(e.message, "error"); } finally { pager.reload(); }
  };
  const remove = async (s) => {
    const n = s.documentCount || 0;
    const crawl = s.kind === "website" ? " Its crawl jobs are cancelled and the site is not crawled again." : "";
    if (!(await confirm({
      title: `Delete the source “${s.name}”?`,
      message: `“${s.name}” and its ${plural(n, "document", "documents")} ${n === 1 ? "is" : "are"} deleted and leave search at once.${crawl} This cannot be undone.`,
      confirmLabel: `Delete source and ${plural(n, "document", "documents")}`,
      danger: true,
    }))) return;
    try {
      await del(`/document/sources/${s.id}`);
      toast(`Source “${s.name}” deleted.`);
      setEpoch((n) => n + 1);
      if (open === s.id) setOpen(null);
      pager.reload();
    } catch (e) { toast(e.message, "error"); }
  };

  return html`<div class="page">
    <${PageHeader} title="Sources" subtitle="Every document belongs to a source: uploaded files, documents sent through the API, and crawled websites." />
    ${manage && html`<${CrawlForm} onStarted=${started} epoch=${epoch} />`}
    ${websites.map((s) => html`<${CrawlCard} key=${s.id} source=${s} manage=${manage} busy=${busy}
      control=${control} remove=${remove} saveInterval=${saveInterval} />`)}
    <${Card} title="All sources" testid="sources-card">
      <${ErrorBox} error=${pager.error} retry=${pager.reload} />
      ${pager.loading && !pager.data ? html`<${Loading} />` : html`<${Table} caption="Sources" rowTestId="source-row" rows=${sources} className="cr-sources"
        columns=${[
          { label: "Name", render: (s) => html`<button type="button" class="link" onClick=${() => setOpen(open === s.id ? null : s.id)} aria-expanded=${open === s.id}
              data-testid="source-name">${s.name}</button>` },
          { label: "Type", render: (s) => html`<${Badge} tone="gray">${s.kind || s.type}</${Badge}>` },
          { label: "Documents", render: (s) => html`<span data-testid="source-documents">${fmtNum(s.documentCount)}</span>`, className: "num" },
          { label: "Latest crawl", render: (s) => (s.kind === "website" ? html`<${LatestCrawl} job=${s.lastCrawl} />` : html`<span class="muted">—</span>`) },
          { label: "Enrichment", render: (s) => manage
            ? html`<${Select} label=${"Enrichment for " + s.name} name="override" value=${s.documentEnrichmentOverride || "inherit"} className="field-inline sr-label"
                options=${[["inherit", "Workspace default"], ["on", "On"], ["off", "Off"]]} onChange=${(e) => setOverride(s, e.currentTarget.value)} />`
            : s.documentEnrichmentOverride },
          { label: "Created", render: (s) => fmtDate(s.createdAt), className: "cr-created" },
          manage && { label: "Actions", render: (s) => html`<div class="row">
            <${Button} small onClick=${() => reprocess(s)} busy=${busy === `${s.id}:reprocess`} testid="source-reprocess">Reprocess<span class="sr-only"> ${s.name}</span></${Button}>
            <${Button} small variant="danger" onClick=${() => remove(s)} testid="source-delete">Delete<span class="sr-only"> ${s.name}</span></${Button}></div>` },
        ].filter(Boolean)}
        empty=${html`<${Empty} title="No sources yet">A source appears when you upload a file, send a document through the API or crawl a website. <a href="/app/documents">Upload documents</a>.</${Empty}>`} />`}
      <${Pager} pager=${pager} label="sources" />
    </${Card}>
    <${ConnectorsCard} connectors=${(pager.data && pager.data.connectors) || []} />
    ${open && html`<${SourceDocs} id=${open} name=${(sources.find((s) => s.id === open) || {}).name} />`}
  </div>`;
}

/** The table's summary of a website's newest job. */
function LatestCrawl({ job }) {
  if (!job) return html`<span class="muted">Not crawled yet</span>`;
  const p = job.progress || {};
  return html`<div class="cr-latest" data-testid="source-latest-crawl">
    <${Badge} tone=${STATUS_TONE[job.status]}>${job.status}</${Badge}>
    <span class="muted small">${fmtNum(p.fetched || 0)} fetched · ${fmtNum(p.indexed || 0)} indexed</span>
  </div>`;
}

// ---------------------------------------------------------------- starting a crawl

function CrawlForm({ onStarted, epoch }) {
  const f = useForm({ url: "", limit: "", include: "", exclude: "", preserveContentLinks: true, recrawl: "0" });
  const [showOptions, setShowOptions] = useState(false);
  useEffect(() => { if (epoch) f.setError(null); }, [epoch]);
  const start = f.submit(async (v) => {
    const url = String(v.url || "").trim();
    if (!url) throw Object.assign(new Error("Enter the address of the site to crawl, such as https://www.example.com/."), { field: "url" });
    const body = { url, preserveContentLinks: !!v.preserveContentLinks };
    if (String(v.limit).trim() !== "") body.limit = Number(v.limit);
    const include = patterns(v.include);
    const exclude = patterns(v.exclude);
    if (include.length) body.includeUrlPatterns = include;
    if (exclude.length) body.excludeUrlPatterns = exclude;
    const hours = Number(v.recrawl) || 0;
    body.recrawlIntervalHours = hours || null;
    const r = await post("/document/crawl", body);
    toast(`Crawling ${r.source ? r.source.name : url}.`);
    f.set("url", "");
    onStarted(r);
  });
  // the pattern and link options fold away; an error that names one of them opens them
  const optionError = ["includeUrlPatterns", "excludeUrlPatterns", "preserveContentLinks"].some((n) => namesField(f.error, n));
  const v = f.values;
  const changed = [
    patterns(v.include).length && plural(patterns(v.include).length, "include pattern", "include patterns"),
    patterns(v.exclude).length && plural(patterns(v.exclude).length, "exclude pattern", "exclude patterns"),
    !v.preserveContentLinks && "links removed",
  ].filter(Boolean);
  return html`<form onSubmit=${start} novalidate data-testid="crawl-form">
    <${Card} title="Crawl a website" className="cr-form">
      <p class="hint cr-intro">Steward follows the site's links from this address and keeps each useful page as a document of the site's source; the pages it leaves out are listed with their reason.</p>
      <div class="cr-form-row">
        <${Input} form=${f} name="url" label="Start address" type="url" placeholder="https://www.example.com/" autocomplete="off" spellcheck="false" testid="crawl-url" />
        <${Input} form=${f} name="limit" label="Page limit" type="number" min="1" inputmode="numeric" hint="Empty: server default" testid="crawl-limit" />
        <${Select} form=${f} name="recrawl" label="Recrawl automatically" options=${intervalOptions(0)} errorField="recrawlIntervalHours" testid="crawl-interval" />
        <div class="cr-submit"><${Button} type="submit" variant="primary" busy=${f.busy} testid="crawl-start">Start crawl</${Button}></div>
      </div>
      <div data-testid="crawl-error"><${FormError} error=${f.error} fields=${FORM_FIELDS} /></div>
      <details class="cr-options" open=${showOptions || optionError} onToggle=${(e) => setShowOptions(e.currentTarget.open)}>
        <summary data-testid="crawl-options">Page patterns and links${changed.length ? html` <span class="muted">· ${changed.join(" · ")}</span>` : ""}</summary>
        <div class="form-grid">
          <${TextArea} form=${f} name="include" label="Index only pages matching" rows="3" errorField="includeUrlPatterns" spellcheck="false"
            placeholder="/docs/*" hint="URL patterns, one per line or comma-separated. Empty: the whole site. Other pages are still followed for their links." testid="crawl-include" />
          <${TextArea} form=${f} name="exclude" label="Never index pages matching" rows="3" errorField="excludeUrlPatterns" spellcheck="false"
            placeholder=${"/login\n*?print=*"} hint="URL patterns, one per line or comma-separated." testid="crawl-exclude" />
        </div>
        <${Checkbox} form=${f} name="preserveContentLinks" label="Keep links in the page text" errorField="preserveContentLinks"
          hint="Links inside a page's content stay in the document, so answers can point readers to them." testid="crawl-preserve-links" />
      </details>
    </${Card}>
  </form>`;
}

// ---------------------------------------------------------------- one website source

function CrawlCard({ source: s, manage, busy, control, remove, saveInterval }) {
  const j = s.lastCrawl || null;
  const c = s.config || {};
  const p = (j && j.progress) || {};
  const status = j ? j.status : null;
  const mine = !!busy && busy.startsWith(s.id + ":");
  const limit = (j && j.limit) || c.limit;
  const target = Math.min(p.discovered || 0, limit || Infinity);
  const progress = status === "queued" || !target ? undefined : Math.min(1, (p.fetched || 0) / target);
  const skipped = ((j && j.skipped) || []).slice().sort((a, b) => String(a.code || a.reason).localeCompare(String(b.code || b.reason)));
  const failures = (j && j.failures) || [];
  const byReason = Object.entries(p.skippedByReason || {}).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  const head = html`<span class="cr-title">${s.name}<span class="cr-kind">website</span></span>`;
  const actions = manage && html`<div class="row cr-actions">
    <${Button} small onClick=${() => control(s, "pause-crawl", "Crawl paused.")} disabled=${!MOVING.has(status) || mine}
      busy=${busy === `${s.id}:pause-crawl`} testid="crawl-pause">Pause</${Button}>
    <${Button} small onClick=${() => control(s, "resume-crawl", "Crawl resumed.")} disabled=${status !== "paused" || mine}
      busy=${busy === `${s.id}:resume-crawl`} testid="crawl-resume">Resume</${Button}>
    <${Button} small onClick=${() => control(s, "recrawl", "Recrawl started.")} disabled=${IN_PROGRESS.has(status) || mine}
      busy=${busy === `${s.id}:recrawl`} testid="crawl-recrawl">Recrawl now</${Button}>
    <${Button} small variant="danger" onClick=${() => remove(s)} disabled=${mine} testid="source-delete">Delete…</${Button}>
  </div>`;
  return html`<${Card} title=${head} actions=${actions} className="cr-card" testid="crawl-card">
    <div class="cr-head" data-status=${status || "none"}>
      <span aria-live="polite" class="cr-status">
        ${j ? html`<${Badge} tone=${STATUS_TONE[status]} testid="crawl-status">${status}</${Badge}>` : html`<${Badge} tone="gray" testid="crawl-status">not crawled</${Badge}>`}
      </span>
      ${j && html`<span class="muted small" data-testid="crawl-when">
        ${j.kind === "recrawl" ? "Recrawl" : "Crawl"} ${status === "queued" ? "queued" : "started"} ${fmtDate(j.startedAt || j.createdAt)}${j.completedAt ? ` · took ${took(j.startedAt || j.createdAt, j.completedAt)}` : status === "processing" ? ` · running for ${took(j.startedAt || j.createdAt)}` : ""}
      </span>`}
      <span class="spacer"></span>
      <${PageUrl} url=${s.externalId || c.url} className="cr-url small" />
    </div>
    ${j && IN_PROGRESS.has(status) && html`<${Progress} value=${progress} label=${"Crawl progress of " + s.name} tone=${status === "paused" ? "amber" : undefined} testid="crawl-progress" />`}
    ${j && html`<dl class="cr-counters" data-testid="crawl-counters">
      ${COUNTERS.map(([k, label]) => html`<div class=${(k === "failed" && p[k]) ? "cr-bad" : ""}>
        <dt>${label}</dt><dd data-testid=${"crawl-" + k}>${fmtNum(p[k] || 0)}</dd></div>`)}
    </dl>`}
    ${j && p.limitReached && html`<p class="alert alert-info" data-testid="crawl-limit-reached">The crawl stopped at its page limit (${fmtNum(limit)} pages). To fetch more, start a crawl of the same address with a higher limit: it updates this source.</p>`}
    ${j && j.lastError && html`<div class="alert alert-error" role="alert" data-testid="crawl-last-error"><strong>The crawl stopped.</strong> ${j.lastError}</div>`}
    ${!j && html`<p class="muted">No crawl has run for this site yet.</p>`}
    <${Meta} items=${[
      ["Documents in the source", html`<span data-testid="crawl-documents">${fmtNum(s.documentCount)}</span>`],
      ["Page limit", fmtNum(limit)],
      ["Index only", (c.includeUrlPatterns || []).length ? html`<span class="mono">${c.includeUrlPatterns.join(", ")}</span>` : "The whole site"],
      ["Never index", (c.excludeUrlPatterns || []).length ? html`<span class="mono">${c.excludeUrlPatterns.join(", ")}</span>` : "—"],
      ["Links in page text", c.preserveContentLinks === false ? "Removed" : "Kept"],
      ["Recrawl automatically", manage
        ? html`<${Select} label=${"Recrawl " + s.name + " automatically"} name="recrawlIntervalHours" value=${String(c.recrawlIntervalHours || 0)}
            options=${intervalOptions(c.recrawlIntervalHours)} className="field-inline sr-label" testid="source-recrawl-interval"
            onChange=${(e) => saveInterval(s, e.currentTarget.value)} />`
        : intervalLabel(c.recrawlIntervalHours)],
    ]} />
    ${byReason.length > 0 && html`<div class="cr-section">
      <h3>Skipped by reason</h3>
      <ul class="cr-reasons" data-testid="crawl-skipped-reasons">
        ${byReason.map(([code, n]) => html`<li data-testid="crawl-skipped-reason" data-code=${code}>${SKIP_REASONS[code] || code.replace(/_/g, " ")} <strong>${fmtNum(n)}</strong></li>`)}
      </ul>
    </div>`}
    ${failures.length > 0 && html`<${PageList} title="Failed pages" total=${j.failedPageCount} rows=${failures} rowTestId="crawl-failed-page" tone="red" />`}
    ${skipped.length > 0 && html`<${PageList} title="Skipped pages" total=${j.skippedPageCount} rows=${skipped} rowTestId="crawl-skipped-page" />`}
  </${Card}>`;
}

/** Pages with their reasons, the first ten unless asked for all (the API keeps at most 200). */
function PageList({ title, total, rows, rowTestId, tone }) {
  const [all, setAll] = useState(false);
  const shown = all ? rows : rows.slice(0, LIST_ROWS);
  const count = Math.max(total || 0, rows.length);
  return html`<div class="cr-section">
    <h3>${title} <span class=${"cr-count" + (tone === "red" ? " cr-count-red" : "")}>${fmtNum(count)}</span></h3>
    <${Table} caption=${title} rows=${shown} rowKey=${(r, i) => `${i}:${r.sourceUrl}`} rowTestId=${rowTestId} className="cr-pages"
      columns=${[
        { label: "Page", render: (r) => html`<${PageUrl} url=${r.sourceUrl} />`, className: "cr-page" },
        { label: "Reason", render: (r) => html`<span data-testid="crawl-reason" data-code=${r.code}>${r.reason || SKIP_REASONS[r.code] || r.code || "—"}</span>` },
      ]} />
    ${(rows.length > LIST_ROWS || count > rows.length) && html`<div class="row cr-more">
      ${rows.length > LIST_ROWS && html`<${Button} small onClick=${() => setAll(!all)} aria-expanded=${all}>${all ? "Show fewer" : `Show all ${fmtNum(rows.length)}`}</${Button}>`}
      ${count > rows.length && html`<span class="muted small">The first ${fmtNum(rows.length)} of ${fmtNum(count)} are kept.</span>`}
    </div>`}
  </div>`;
}

function SourceDocs({ id, name }) {
  const pager = usePager((cursor) => get(`/document/sources/${id}/documents`, { cursor, limit: 25 }), "documents", [id]);
  return html`<${Card} title=${"Documents of " + (name || "source")}>
    <${ErrorBox} error=${pager.error} />
    <${Table} caption="Documents of the source" rows=${pager.items} columns=${[
      { label: "Title", render: (d) => html`<a href=${"/app/documents/" + d.id}>${d.title}</a>` },
      { label: "Status", render: (d) => html`<${StatusCell} doc=${d} />` },
      { label: "Updated", render: (d) => fmtDate(d.updatedAt) },
    ]} empty=${html`<${Empty} title="No documents in this source" />`} />
    <${Pager} pager=${pager} label="documents" />
  </${Card}>`;
}

/** The workspace's connectors: what they brought in (documents, messages) and where to manage them. */
function ConnectorsCard({ connectors }) {
  if (!connectors.length) return null;
  return html`<${Card} title="Connectors" testid="source-connectors">
    <${Table} caption="Connectors" rowTestId="source-connector" rows=${connectors} columns=${[
      { label: "Connector", render: (c) => html`<a href=${`/app/settings/connectors/${c.id}`}>${c.name}</a>` },
      { label: "Status", render: (c) => html`<${Badge} tone=${c.enabled ? "green" : "gray"}>${c.enabled ? "enabled" : "off"}</${Badge}>` },
      { label: "Brought in", render: (c) => (c.messageCount !== null && c.messageCount !== undefined
        ? plural(c.messageCount, "message", "messages") + " (90 days)"
        : c.documentCount !== null && c.documentCount !== undefined ? plural(c.documentCount, "document", "documents") : "—") },
    ]} />
  </${Card}>`;
}
