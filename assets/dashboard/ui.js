// Shared pieces: form fields that show the API's message next to the field it names, buttons,
// paged tables, empty states, toasts, progress, badges, dialogs and a tiny SVG bar chart.
// Everything user-supplied is rendered as text nodes (never HTML).

import { h, render } from "../vendor/preact.mjs";
import { useCallback, useEffect, useRef, useState } from "../vendor/hooks.mjs";
import htm from "../vendor/htm.mjs";
import { messageOf } from "./api.js";

export const html = htm.bind(h);

let idSeq = 0;
export function useId(prefix = "f") {
  const r = useRef(null);
  if (!r.current) r.current = `${prefix}-${++idSeq}`;
  return r.current;
}

// ---------------------------------------------------------------- data hooks

/** Runs `fn` (async) on mount and when `deps` change: {data, error, loading, reload, setData}. */
export function useAsync(fn, deps = []) {
  const [state, set] = useState({ data: undefined, error: null, loading: true });
  const seq = useRef(0);
  const run = useCallback(async () => {
    const n = ++seq.current;
    set((s) => ({ ...s, loading: true, error: null }));
    try {
      const data = await fn();
      if (n === seq.current) set({ data, error: null, loading: false });
    } catch (error) {
      if (n === seq.current) set((s) => ({ ...s, error, loading: false }));
    }
  }, deps);
  useEffect(() => { run(); }, [run]);
  return { ...state, reload: run, setData: (d) => set((s) => ({ ...s, data: typeof d === "function" ? d(s.data) : d })) };
}

/**
 * Cursor paging over a list route: `fetchPage(cursor)` resolves to the response; `key` names the
 * array in it. Keeps a stack of cursors so Previous works.
 */
export function usePager(fetchPage, key, deps = []) {
  const [stack, setStack] = useState([null]);
  const cursor = stack[stack.length - 1];
  const res = useAsync(() => fetchPage(cursor), [cursor, ...deps]);
  useEffect(() => { setStack([null]); }, deps);
  const data = res.data || {};
  return {
    ...res,
    items: data[key] || [],
    total: data.total,
    page: stack.length,
    hasMore: !!data.hasMore && !!data.nextCursor,
    hasPrev: stack.length > 1,
    next: () => data.nextCursor && setStack((s) => [...s, data.nextCursor]),
    prev: () => setStack((s) => (s.length > 1 ? s.slice(0, -1) : s)),
    first: () => setStack([null]),
  };
}

/** Form state: values, the last error (an ApiError), busy, and submit(fn) that catches into `error`. */
export function useForm(initial) {
  const [values, setValues] = useState(initial);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (name, v) => setValues((s) => ({ ...s, [name]: v }));
  const bind = (name) => ({
    name,
    value: values[name] ?? "",
    onInput: (e) => set(name, e.currentTarget.type === "checkbox" ? e.currentTarget.checked : e.currentTarget.value),
  });
  const submit = (fn) => async (e) => {
    if (e && e.preventDefault) e.preventDefault();
    setBusy(true);
    setError(null);
    try { await fn(values); } catch (err) { setError(err); } finally { setBusy(false); }
  };
  return { values, setValues, set, bind, error, setError, busy, submit };
}

// ---------------------------------------------------------------- formatting

export function fmtDate(s) {
  if (!s) return "—";
  const d = new Date(s);
  if (isNaN(d)) return String(s);
  return d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "—";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${i ? v.toFixed(v < 10 ? 1 : 0) : v} ${u[i]}`;
}

export function fmtNum(n) { return n === null || n === undefined ? "—" : Number(n).toLocaleString(); }

export function shortId(id) { return id ? String(id).slice(-8) : "—"; }

// ---------------------------------------------------------------- errors and fields

/** True when `err` names `name` (exactly, or a path below it: "metadataFilter" ⊃ "metadataFilter.year"). */
export function namesField(err, name) {
  if (!err || !err.field || !name) return false;
  const f = err.field;
  return f === name || f.startsWith(name + ".") || f.startsWith(name + "[");
}

export function fieldError(err, name) { return namesField(err, name) ? messageOf(err) : null; }

/** A labelled field: label, the control (children get id/aria-describedby), hint, error. */
export function Field({ label, id, error, hint, children, className = "", testid }) {
  const errId = id + "-err";
  const hintId = id + "-hint";
  return html`<div class=${"field " + className + (error ? " has-error" : "")} data-testid=${testid}>
    <label for=${id}>${label}</label>
    ${children}
    ${hint && html`<p class="hint" id=${hintId}>${hint}</p>`}
    ${error && html`<p class="field-error" id=${errId} role="alert" data-testid="field-error">${error}</p>`}
  </div>`;
}

function described(id, error, hint) {
  return [error && id + "-err", hint && id + "-hint"].filter(Boolean).join(" ") || undefined;
}

/** A text input bound to a form: `form.bind(name)`; shows the form error naming `name` (or `errorField`). */
export function Input({ form, name, label, hint, type = "text", errorField, testid, className, error: errorProp, ...rest }) {
  const id = useId(name);
  const error = form ? fieldError(form.error, errorField || name) : errorProp;
  const bound = form ? form.bind(name) : {};
  return html`<${Field} label=${label} id=${id} error=${error} hint=${hint} className=${className}>
    <input id=${id} type=${type} ...${bound} ...${rest} aria-invalid=${error ? "true" : undefined}
      aria-describedby=${described(id, error, hint)} data-testid=${testid} />
  </${Field}>`;
}

export function TextArea({ form, name, label, hint, errorField, testid, rows = 4, className, error: errorProp, ...rest }) {
  const id = useId(name);
  const error = form ? fieldError(form.error, errorField || name) : errorProp;
  const bound = form ? form.bind(name) : {};
  return html`<${Field} label=${label} id=${id} error=${error} hint=${hint} className=${className}>
    <textarea id=${id} rows=${rows} ...${bound} ...${rest} aria-invalid=${error ? "true" : undefined}
      aria-describedby=${described(id, error, hint)} data-testid=${testid}></textarea>
  </${Field}>`;
}

/** A select; `options` are [value, label] pairs or strings. */
export function Select({ form, name, label, hint, options, errorField, testid, className, error: errorProp, ...rest }) {
  const id = useId(name);
  const error = form ? fieldError(form.error, errorField || name) : errorProp;
  const bound = form ? form.bind(name) : {};
  return html`<${Field} label=${label} id=${id} error=${error} hint=${hint} className=${className}>
    <select id=${id} aria-label=${className && className.includes("sr-label") ? label : undefined} ...${bound} ...${rest} onChange=${rest.onChange || bound.onInput} aria-invalid=${error ? "true" : undefined}
      aria-describedby=${described(id, error, hint)} data-testid=${testid}>
      ${options.map((o) => {
        const [v, l] = Array.isArray(o) ? o : [o, o];
        return html`<option value=${v}>${l}</option>`;
      })}
    </select>
  </${Field}>`;
}

export function Checkbox({ form, name, label, hint, checked, onChange, testid, disabled, errorField }) {
  const id = useId(name);
  const error = form ? fieldError(form.error, errorField || name) : null;
  const value = form ? !!form.values[name] : !!checked;
  const change = (e) => (form ? form.set(name, e.currentTarget.checked) : onChange && onChange(e.currentTarget.checked));
  return html`<div class=${"check" + (error ? " has-error" : "")}>
    <input type="checkbox" id=${id} checked=${value} onChange=${change} disabled=${disabled} data-testid=${testid}
      aria-describedby=${described(id, error, hint)} />
    <label for=${id}>${label}</label>
    ${hint && html`<p class="hint" id=${id + "-hint"}>${hint}</p>`}
    ${error && html`<p class="field-error" id=${id + "-err"} role="alert">${error}</p>`}
  </div>`;
}

/** The error of a form that names no visible field (or every error when `fields` is not given). */
export function FormError({ error, fields = [] }) {
  if (!error) return null;
  if (fields.some((f) => namesField(error, f))) return null;
  return html`<div class="alert alert-error" role="alert" data-testid="form-error">
    <strong>${titleOf(error)}</strong> ${messageOf(error)}
    ${error.details && error.details.errors && html`<ul>${error.details.errors.map((e) => html`<li>${typeof e === "string" ? e : e.message || JSON.stringify(e)}</li>`)}</ul>`}
  </div>`;
}

function titleOf(err) {
  const c = err && err.code;
  const t = {
    forbidden: "Not allowed.",
    not_found: "Not found.",
    conflict: "Conflict.",
    revision_conflict: "Someone changed this meanwhile.",
    revision_invalid: "Cannot publish.",
    rate_limit_exceeded: "Too many attempts.",
    encryption_not_configured: "Encryption is not configured.",
    network_error: "Offline.",
    payload_too_large: "Too large.",
  }[c];
  return t || "";
}

export function ErrorBox({ error, retry }) {
  if (!error) return null;
  return html`<div class="alert alert-error" role="alert">
    <strong>${titleOf(error) || "Something went wrong."}</strong> ${messageOf(error)}
    ${retry && html` <button type="button" class="btn btn-small" onClick=${retry}>Try again</button>`}
  </div>`;
}

// ---------------------------------------------------------------- buttons, badges, states

export function Button({ variant = "secondary", busy, children, type = "button", small, testid, className = "", ...rest }) {
  return html`<button type=${type} class=${`btn btn-${variant}${small ? " btn-small" : ""} ${className}`} disabled=${busy || rest.disabled}
    aria-busy=${busy ? "true" : undefined} data-testid=${testid} ...${rest}>
    ${busy && html`<span class="spinner" aria-hidden="true"></span>`}${children}
  </button>`;
}

const TONES = {
  ready: "green", published: "green", grounded: "green", answered: "green", accepted: "green", applied: "green", bound: "green", active: "green", ai_owned: "blue",
  queued: "blue", processing: "blue", pending: "blue", candidate: "blue", draft_changes: "amber", human_owned: "amber",
  partial: "amber", degraded: "amber", grounded_degraded: "amber", unclear: "amber", skipped: "gray", expired: "gray", revoked: "gray", not_recorded: "gray",
  failed: "red", unanswered: "red", no_support: "red", no_context: "red", unknown_skill: "red", error: "red",
};

export function Badge({ tone, children, title, testid }) {
  const t = tone || TONES[String(children)] || "gray";
  return html`<span class=${"badge badge-" + t} title=${title} data-testid=${testid}>${String(children).replace(/_/g, " ")}</span>`;
}

export function Empty({ title, children, action, testid = "empty-state" }) {
  return html`<div class="empty" data-testid=${testid}>
    <p class="empty-title">${title}</p>
    ${children && html`<p class="empty-text">${children}</p>`}
    ${action}
  </div>`;
}

export function Loading({ label = "Loading…" }) {
  return html`<div class="loading" role="status"><span class="spinner" aria-hidden="true"></span> ${label}</div>`;
}

/** A progress bar: `value` 0–1 (undefined: indeterminate). */
export function Progress({ value, label, testid, tone }) {
  const pct = value === undefined || value === null ? undefined : Math.round(Math.max(0, Math.min(1, value)) * 100);
  return html`<div class=${"progress" + (tone ? " progress-" + tone : "")} data-testid=${testid}>
    <progress max="100" value=${pct} aria-label=${label}>${pct === undefined ? "" : pct + "%"}</progress>
  </div>`;
}

export function Card({ title, actions, children, className = "", testid, id }) {
  const gen = useId("card");
  const hid = id || gen;
  return html`<section class=${"card " + className} aria-labelledby=${title ? hid : undefined} data-testid=${testid}>
    ${(title || actions) && html`<header class="card-head">
      ${title && html`<h2 id=${hid}>${title}</h2>`}
      ${actions && html`<div class="card-actions">${actions}</div>`}
    </header>`}
    ${children}
  </section>`;
}

export function PageHeader({ title, subtitle, actions, back }) {
  return html`<div class="page-head">
    <div>
      ${back && html`<a class="back" href=${back[0]}>← ${back[1]}</a>`}
      <h1 tabindex="-1" id="page-title">${title}</h1>
      ${subtitle && html`<p class="subtitle">${subtitle}</p>`}
    </div>
    ${actions && html`<div class="page-actions">${actions}</div>`}
  </div>`;
}

/** Definition list of [label, value] pairs. */
export function Meta({ items }) {
  return html`<dl class="meta">${items.filter(Boolean).map(([k, v]) => html`<div><dt>${k}</dt><dd>${v ?? "—"}</dd></div>`)}</dl>`;
}

// ---------------------------------------------------------------- tables and paging

/**
 * A table: `columns` [{label, render(row) | key, className}], `rows`; `rowTestId` names each row.
 * `empty` is shown instead when there are no rows.
 */
export function Table({ columns, rows, rowKey = (r) => r.id, rowTestId, empty, caption, className = "" }) {
  if (!rows || !rows.length) return empty || null;
  return html`<div class="table-wrap"><table class=${"table " + className}>
    ${caption && html`<caption class="sr-only">${caption}</caption>`}
    <thead><tr>${columns.map((c) => html`<th scope="col" class=${c.className}>${c.label}</th>`)}</tr></thead>
    <tbody>${rows.map((r, i) => html`<tr key=${rowKey(r, i)} data-testid=${rowTestId}>
      ${columns.map((c) => html`<td class=${c.className}>${c.render ? c.render(r, i) : r[c.key] ?? "—"}</td>`)}
    </tr>`)}</tbody>
  </table></div>`;
}

export function Pager({ pager, label = "items" }) {
  if (!pager.hasPrev && !pager.hasMore) {
    return pager.total !== undefined ? html`<p class="pager-info">${fmtNum(pager.total)} ${label}</p>` : null;
  }
  return html`<nav class="pager" aria-label=${"Pages of " + label}>
    <span class="pager-info">Page ${pager.page}${pager.total !== undefined ? html` · ${fmtNum(pager.total)} ${label}` : ""}</span>
    <${Button} small onClick=${pager.prev} disabled=${!pager.hasPrev} testid="page-prev">Previous</${Button}>
    <${Button} small onClick=${pager.next} disabled=${!pager.hasMore} testid="page-next">Next</${Button}>
  </nav>`;
}

// ---------------------------------------------------------------- toasts

let toastSeq = 0;
let pushToast = null;

/** Shows a short message (kind: info, success, error) in the polite live region. */
export function toast(message, kind = "success") {
  if (pushToast) pushToast({ id: ++toastSeq, message, kind });
}

export function Toaster() {
  const [items, setItems] = useState([]);
  useEffect(() => {
    pushToast = (t) => {
      setItems((s) => [...s.slice(-3), t]);
      setTimeout(() => setItems((s) => s.filter((x) => x.id !== t.id)), t.kind === "error" ? 8000 : 4000);
    };
    return () => { pushToast = null; };
  }, []);
  return html`<div class="toasts" aria-live="polite" aria-atomic="false" data-testid="toasts">
    ${items.map((t) => html`<div key=${t.id} class=${"toast toast-" + t.kind} role=${t.kind === "error" ? "alert" : "status"}>
      <span>${t.message}</span>
      <button type="button" class="toast-close" aria-label="Dismiss" onClick=${() => setItems((s) => s.filter((x) => x.id !== t.id))}>×</button>
    </div>`)}
  </div>`;
}

// ---------------------------------------------------------------- dialogs

/** The element now in the page that stands for `el`, which left it: the one with its id, else
 * with its data-testid. */
function standIn(el) {
  if (!el.getAttribute) return null;
  const id = el.id;
  const tid = el.getAttribute("data-testid");
  return (id && document.getElementById(id))
    || (tid && document.querySelector(`[data-testid="${CSS.escape(tid)}"]`))
    || null;
}

/** A modal dialog (native <dialog>: focus trap, Escape closes). */
export function Modal({ open, title, onClose, children, footer, wide, testid }) {
  const ref = useRef(null);
  const hid = useId("dlg");
  useEffect(() => {
    const d = ref.current;
    if (!d || !open) return undefined;
    // focus goes back to what opened the dialog, whether it closes or leaves the page
    const opener = document.activeElement;
    if (!d.open) d.showModal();
    return () => {
      if (d.open) d.close();
      // the page may have drawn itself again meanwhile (a list refreshed while the dialog was
      // open): then the opener's stand-in, the element with its id or test id, takes the focus
      const back = opener && (opener.isConnected ? opener : standIn(opener));
      if (back && typeof back.focus === "function") back.focus();
    };
  }, [open]);
  return html`<dialog ref=${ref} class=${"modal" + (wide ? " modal-wide" : "")} aria-labelledby=${hid} data-testid=${testid}
    onClose=${() => open && onClose && onClose()} onCancel=${(e) => { e.preventDefault(); onClose && onClose(); }}>
    ${open && html`<div class="modal-body">
      <header class="modal-head"><h2 id=${hid}>${title}</h2>
        <button type="button" class="icon-btn" aria-label="Close" onClick=${onClose}>×</button></header>
      ${children}
      ${footer && html`<footer class="modal-foot">${footer}</footer>`}
    </div>`}
  </dialog>`;
}

/** Asks a yes/no question in a modal; resolves true when confirmed. */
export function confirm({ title = "Are you sure?", message, confirmLabel = "Confirm", danger = false } = {}) {
  return new Promise((resolve) => {
    const host = document.createElement("div");
    document.body.appendChild(host);
    const done = (v) => { render(null, host); host.remove(); resolve(v); };
    const C = () => html`<${Modal} open title=${title} onClose=${() => done(false)} testid="confirm-dialog"
      footer=${html`<${Button} onClick=${() => done(false)}>Cancel</${Button}>
        <${Button} variant=${danger ? "danger" : "primary"} onClick=${() => done(true)} testid="confirm-ok" autofocus>${confirmLabel}</${Button}>`}>
      <p>${message}</p>
    </${Modal}>`;
    render(html`<${C} />`, host);
  });
}

/** Shows a secret once, with a copy button and the warning that it will not be shown again. */
export function SecretOnce({ label = "Secret", secret, testid = "secret-once" }) {
  const [copied, setCopied] = useState(false);
  const id = useId("secret");
  const copy = async () => {
    try { await navigator.clipboard.writeText(secret); setCopied(true); } catch { /* clipboard blocked */ }
  };
  return html`<div class="secret" data-testid=${testid}>
    <label for=${id}>${label}</label>
    <div class="secret-row">
      <input id=${id} readonly value=${secret} onFocus=${(e) => e.currentTarget.select()} data-testid="secret-value" />
      <${Button} small onClick=${copy}>${copied ? "Copied" : "Copy"}</${Button}>
    </div>
    <p class="hint">Copy it now: it is shown only once.</p>
  </div>`;
}

// ---------------------------------------------------------------- tabs

/** Tabs as links (each tab has its own URL): [{href, label, active}]. */
export function TabLinks({ tabs, label }) {
  return html`<nav class="tabs" aria-label=${label}>
    ${tabs.map((t) => html`<a href=${t.href} class=${"tab" + (t.active ? " active" : "")} aria-current=${t.active ? "page" : undefined} data-testid=${t.testid}>${t.label}</a>`)}
  </nav>`;
}

// ---------------------------------------------------------------- highlighting

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', "#39": "'", "#x27": "'", apos: "'", nbsp: "\u00a0" };

function unescape(s) {
  return s.replace(/&(#\d+|#x[0-9a-f]+|\w+);/gi, (m, e) => {
    if (ENTITIES[e.toLowerCase()] !== undefined) return ENTITIES[e.toLowerCase()];
    if (e[0] === "#") {
      const n = e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return isNaN(n) ? m : String.fromCodePoint(n);
    }
    return m;
  });
}

/**
 * A search snippet: the API wraps query terms in <mark>…</mark> and HTML-escapes the rest. This
 * splits it into text nodes and <mark> elements; nothing is parsed as HTML.
 */
export function Highlighted({ text }) {
  const parts = [];
  const re = /<mark>([\s\S]*?)<\/mark>/g;
  let last = 0;
  let m;
  const s = String(text || "");
  while ((m = re.exec(s))) {
    if (m.index > last) parts.push(unescape(s.slice(last, m.index)));
    parts.push(html`<mark>${unescape(m[1])}</mark>`);
    last = m.index + m[0].length;
  }
  if (last < s.length) parts.push(unescape(s.slice(last)));
  return html`<span class="snippet">${parts}</span>`;
}

// ---------------------------------------------------------------- chart

/**
 * A stacked bar chart in SVG: `data` [{label, values: [n…]}], `series` [{name, tone}]. Each bar
 * has a <title>; a visually hidden table carries the same numbers for screen readers.
 */
export function BarChart({ data, series, title, height = 160, format = fmtNum, testid }) {
  const w = 640;
  const pad = { l: 44, r: 8, t: 8, b: 22 };
  const max = Math.max(1, ...data.map((d) => d.values.reduce((a, b) => a + (b || 0), 0)));
  const bw = (w - pad.l - pad.r) / Math.max(1, data.length);
  const y = (v) => pad.t + (height - pad.t - pad.b) * (1 - v / max);
  const every = Math.ceil(data.length / 8);
  return html`<figure class="chart" data-testid=${testid}>
    <svg viewBox=${`0 0 ${w} ${height}`} role="img" aria-label=${title} class="chart-svg">
      <line x1=${pad.l} x2=${w - pad.r} y1=${y(0)} y2=${y(0)} class="axis" />
      <line x1=${pad.l} x2=${w - pad.r} y1=${y(max)} y2=${y(max)} class="grid" />
      <text x=${pad.l - 6} y=${y(max) + 4} class="tick" text-anchor="end">${format(max)}</text>
      <text x=${pad.l - 6} y=${y(0)} class="tick" text-anchor="end">0</text>
      ${data.map((d, i) => {
        let acc = 0;
        return html`<g>
          ${d.values.map((v, si) => {
            if (!v) return null;
            const y0 = y(acc);
            acc += v;
            const y1 = y(acc);
            return html`<rect x=${pad.l + i * bw + bw * 0.15} width=${Math.max(1, bw * 0.7)} y=${y1} height=${Math.max(0.5, y0 - y1)}
              class=${"bar tone-" + (series[si].tone || si)}><title>${`${d.label} · ${series[si].name}: ${format(v)}`}</title></rect>`;
          })}
          ${i % every === 0 && html`<text x=${pad.l + i * bw + bw / 2} y=${height - 6} class="tick" text-anchor="middle">${d.short || d.label}</text>`}
        </g>`;
      })}
    </svg>
    <figcaption class="legend">
      <span class="legend-title">${title}</span>
      ${series.map((s, si) => html`<span class="legend-item"><span class=${"swatch tone-" + (s.tone || si)} aria-hidden="true"></span>${s.name}</span>`)}
    </figcaption>
    <table class="sr-only"><caption>${title}</caption>
      <thead><tr><th scope="col">Day</th>${series.map((s) => html`<th scope="col">${s.name}</th>`)}</tr></thead>
      <tbody>${data.map((d) => html`<tr><th scope="row">${d.label}</th>${d.values.map((v) => html`<td>${format(v)}</td>`)}</tr>`)}</tbody>
    </table>
  </figure>`;
}

/** Polls `fn` every `ms` while `active`; stops on unmount. */
export function usePoll(fn, ms, active) {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    if (!active) return undefined;
    let stop = false;
    let t;
    const tick = async () => {
      try { await saved.current(); } catch { /* keep polling */ }
      if (!stop) t = setTimeout(tick, ms);
    };
    t = setTimeout(tick, ms);
    return () => { stop = true; clearTimeout(t); };
  }, [active, ms]);
}

/** Pretty JSON in a <pre> (as text). */
export function Json({ value }) {
  return html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`;
}

/** A Copy button: the clipboard when the browser allows it, else a hint to copy by hand. */
export function CopyButton({ text, label = "Copy", what, testid }) {
  const [copied, setCopied] = useState(false);
  const timer = useRef(null);
  useEffect(() => () => clearTimeout(timer.current), []);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
      clearTimeout(timer.current);
      timer.current = setTimeout(() => setCopied(false), 2000);
    } catch {
      toast("The browser blocked the clipboard: select the text and copy it by hand.", "error");
    }
  };
  return html`<${Button} small onClick=${copy} testid=${testid} data-copied=${copied ? "true" : undefined}>
    ${copied ? "Copied" : label}${what && html`<span class="sr-only"> ${what}</span>`}
  </${Button}>`;
}
