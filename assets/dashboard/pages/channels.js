// Public chat & widget: the workspace's public channels (the anonymous chat link and the website
// widget, each with its launch token), how the assistant greets visitors on them, and a live
// preview of the widget drawn with the dashboard's own markup (a picture, not the widget). Edits
// are saved together with Save; rotating a token applies at once.

import { useEffect, useMemo, useRef, useState } from "../../vendor/hooks.mjs";
import { get, post, put } from "../api.js";
import { navigate } from "../router.js";
import { can } from "../session.js";
import {
  Badge, Button, Card, CopyButton, ErrorBox, FormError, Input, Loading, PageHeader, Select, TextArea, confirm, fieldError, fmtDate, html, namesField, toast, useAsync, useId,
} from "../ui.js";

const PATH = "/settings/general";
const HEX = /^#[0-9a-fA-F]{6}$/;
const LOCALE = /^[A-Za-z]{2,3}(-[A-Za-z]{4})?(-([A-Za-z]{2}|\d{3}))?$/;
const MAX_ORIGINS = 20;
const DEFAULT_THEME = { brand: "#0f172a", brandText: "#f8fafc", surface: "#ffffff", text: "#0f172a" };

/**
 * The widget's texts: key, what it is, and the widget's built-in English text used when a field is
 * left blank (assets/widget/widget.js keeps the same defaults; a blank title shows the assistant's
 * name).
 */
export const COPY_KEYS = [
  ["title", "Title", ""],
  ["subtitle", "Subtitle", "Ask us anything. We usually answer in seconds."],
  ["placeholder", "Message placeholder", "Type your message…"],
  ["send", "Send button", "Send"],
  ["close", "Close button", "Close chat"],
  ["open", "Launcher's spoken name", "Open chat"],
  ["unavailable", "Unavailable notice", "The chat is not available right now."],
  ["handoff", "Handoff notice", "A person will reply here soon."],
  ["newMessages", "Unread messages ({n} = count)", "{n} unread messages"],
  ["error", "Error message", "Something went wrong. Your message was not answered."],
  ["retry", "Retry button", "Try again"],
  ["sources", "Sources heading", "Sources"],
  ["feedbackUp", "Helpful button", "Helpful"],
  ["feedbackDown", "Not helpful button", "Not helpful"],
  ["feedbackThanks", "Feedback thanks", "Thanks for your feedback."],
  ["poweredBy", "Powered-by line", "Powered by Steward"],
];
const BUILT_IN = Object.fromEntries(COPY_KEYS.map(([k, , d]) => [k, d]));

const THEME_FIELDS = [
  ["brand", "Brand", "Launcher, header and visitor messages"],
  ["brandText", "Text on brand", "Text on the brand colour"],
  ["surface", "Panel background", "The chat panel"],
  ["text", "Panel text", "Text on the panel background"],
];

// ---------------------------------------------------------------- settings ⇄ form

/** The editable part of the settings, as the form holds it. */
function draftOf(s) {
  const copy = {};
  for (const [loc, texts] of Object.entries(s.websiteEmbedCopy || {})) {
    if (texts && typeof texts === "object") copy[loc] = { ...texts };
  }
  return {
    anonymousChatEnabled: !!s.anonymousChatEnabled,
    assistantName: s.assistantName || "",
    greetingInstruction: s.greetingInstruction || "",
    assistantDefaultLocale: s.assistantDefaultLocale || "",
    proactiveGreetingEnabled: !!s.proactiveGreetingEnabled,
    websiteEmbedEnabled: !!s.websiteEmbedEnabled,
    websiteEmbedAllowedOrigins: [...(s.websiteEmbedAllowedOrigins || [])],
    websiteEmbedLauncherLabel: s.websiteEmbedLauncherLabel || "",
    websiteEmbedLauncherPosition: s.websiteEmbedLauncherPosition || "bottom-right",
    websiteEmbedTheme: { ...DEFAULT_THEME, ...(s.websiteEmbedTheme || {}) },
    websiteEmbedCopy: copy,
    publicChatVisitorMessagesPerMinute: numText(s.publicChatVisitorMessagesPerMinute),
    publicChatVisitorMessagesPerDay: numText(s.publicChatVisitorMessagesPerDay),
  };
}

/** A number setting as its input holds it: blank for null. */
function numText(v) {
  return v === null || v === undefined ? "" : String(v);
}

/** An input's number, null when blank (the server says what is out of range). */
function numOf(t) {
  const v = t.trim();
  return v === "" ? null : Number(v);
}

/** The PUT body of a form: blank texts and empty languages dropped, keys in a stable order. */
function bodyOf(d) {
  const copy = {};
  for (const loc of Object.keys(d.websiteEmbedCopy).sort()) {
    const texts = {};
    for (const k of Object.keys(d.websiteEmbedCopy[loc]).sort()) {
      const v = d.websiteEmbedCopy[loc][k];
      if (typeof v !== "string" || v.trim()) texts[k] = v;
    }
    if (Object.keys(texts).length) copy[loc] = texts;
  }
  return {
    ...d, assistantDefaultLocale: d.assistantDefaultLocale.trim() || null, websiteEmbedCopy: copy,
    publicChatVisitorMessagesPerMinute: numOf(d.publicChatVisitorMessagesPerMinute),
    publicChatVisitorMessagesPerDay: numOf(d.publicChatVisitorMessagesPerDay),
  };
}

const same = (a, b) => JSON.stringify(bodyOf(a)) === JSON.stringify(bodyOf(b));

// ---------------------------------------------------------------- helpers

function luminance(hex) {
  const n = parseInt(hex.slice(1), 16);
  const [r, g, b] = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map((c) => {
    const v = c / 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** The WCAG contrast ratio of two 6-digit hex colours (null when either is not one). */
export function contrast(a, b) {
  if (!HEX.test(a) || !HEX.test(b)) return null;
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

/** What the server will store for an origin, when the browser can tell (null: it cannot). */
function normalizedOrigin(raw) {
  const s = raw.trim();
  if (s === "*") return "*";
  try {
    const u = new URL(s);
    if (!/^https?:$/.test(u.protocol) || u.username || u.password) return null;
    if ((u.pathname !== "/" && u.pathname !== "") || u.search || u.hash) return null;
    return u.origin;
  } catch {
    return null;
  }
}

/** An HTML attribute value (the snippet is text the operator pastes into their site). */
function attr(v) {
  return String(v).replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** The embed snippet for the saved settings. */
export function snippetOf(origin, s) {
  const t = { ...DEFAULT_THEME, ...(s.websiteEmbedTheme || {}) };
  const lines = [
    `<script src="${attr(origin + "/embed.js")}"`,
    `  data-token="${attr(s.websiteEmbedToken)}"`,
    `  data-label="${attr(s.websiteEmbedLauncherLabel)}"`,
    `  data-position="${attr(s.websiteEmbedLauncherPosition)}"`,
    `  data-brand="${attr(t.brand)}"`,
    `  data-brand-text="${attr(t.brandText)}"`,
  ];
  if (s.proactiveGreetingEnabled) lines.push(`  data-proactive="true"`);
  lines.push("  async></script>");
  return lines.join("\n");
}

/** Languages to offer for the widget's texts: those with texts, the default one, then en. */
function localesOf(d, extra) {
  const out = [];
  const add = (l) => { if (l && !out.includes(l)) out.push(l); };
  add(d.assistantDefaultLocale.trim());
  Object.keys(d.websiteEmbedCopy).sort().forEach(add);
  add("en");
  add(extra);
  return out;
}

/** Asks before leaving the page (a reload, closing the tab, an in-app link) with unsaved edits. */
function useLeaveGuard(dirty) {
  useEffect(() => {
    if (!dirty) return undefined;
    const beforeUnload = (e) => { e.preventDefault(); e.returnValue = ""; };
    const click = async (e) => {
      if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      const a = e.target.closest && e.target.closest("a[href]");
      if (!a || a.target || a.hasAttribute("download")) return;
      const u = new URL(a.href, location.href);
      if (u.origin !== location.origin || !(u.pathname === "/" || u.pathname.startsWith("/app")) || u.pathname === location.pathname) return;
      e.preventDefault();
      e.stopPropagation();
      const ok = await confirm({
        title: "Leave without saving?",
        message: "Your changes to the public channels are not saved. Leaving this page discards them.",
        confirmLabel: "Discard and leave",
        danger: true,
      });
      if (ok) navigate(u.pathname + u.search + u.hash);
    };
    window.addEventListener("beforeunload", beforeUnload);
    document.addEventListener("click", click, true);
    return () => {
      window.removeEventListener("beforeunload", beforeUnload);
      document.removeEventListener("click", click, true);
    };
  }, [dirty]);
}

// ---------------------------------------------------------------- small pieces

/** An on/off switch: a checkbox with the switch role. */
function Switch({ label, hint, checked, onChange, disabled, testid }) {
  const id = useId("switch");
  return html`<div class="ch-switch-row">
    <input type="checkbox" role="switch" id=${id} class="ch-switch" checked=${checked} disabled=${disabled}
      onChange=${(e) => onChange(e.currentTarget.checked)} aria-describedby=${hint ? id + "-hint" : undefined} data-testid=${testid} />
    <label for=${id}>${label}</label>
    <span class=${"ch-state" + (checked ? " on" : "")} aria-hidden="true">${checked ? "On" : "Off"}</span>
    ${hint && html`<p class="hint" id=${id + "-hint"}>${hint}</p>`}
  </div>`;
}

function LastUsed({ at, testid }) {
  return html`<span class="muted small" data-testid=${testid}>Last used: ${at ? fmtDate(at) : "never"}</span>`;
}

// ---------------------------------------------------------------- the page

export default function Channels() {
  const res = useAsync(() => get(PATH), []);
  if (res.error && !res.data) {
    return html`<div class="page">
      <${PageHeader} title="Public chat & widget" />
      <${ErrorBox} error=${res.error} retry=${res.reload} />
    </div>`;
  }
  if (!res.data) return html`<${Loading} />`;
  return html`<${Editor} initial=${res.data} />`;
}

function Editor({ initial }) {
  const manage = can("workspace.settings.manage");
  const [saved, setSaved] = useState(initial);
  const [draft, setDraft] = useState(() => draftOf(initial));
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [locale, setLocale] = useState(() => localesOf(draftOf(initial))[0]);
  const agents = useAsync(() => (can("workspace.agents.read") ? get("/agents") : Promise.resolve(null)), []);
  const defaultAgent = agents.data && (agents.data.agents || []).find((a) => a.isDefault);
  const dirty = useMemo(() => !same(draft, draftOf(saved)), [draft, saved]);
  useLeaveGuard(dirty);

  // after a refused save, focus the first field the error names (its message is next to it)
  useEffect(() => {
    if (!error) return;
    const el = document.querySelector(".ch-page .has-error input:not([type=color]), .ch-page .has-error textarea, .ch-page .has-error select, .ch-page .has-error button");
    if (el) {
      el.focus({ preventScroll: true });
      el.scrollIntoView({ block: "center" });
    }
  }, [error]);

  const set = (k, v) => setDraft((d) => ({ ...d, [k]: v }));
  const ro = !manage;

  const save = async (e) => {
    e.preventDefault();
    if (!manage || busy) return;
    setBusy(true);
    setError(null);
    try {
      const next = await put(PATH, bodyOf(draft));
      setSaved(next);
      setDraft(draftOf(next));
      toast("Public channel settings saved.");
    } catch (err) {
      setError(err);
      const m = err.field && /^websiteEmbedCopy\.(.+)$/.exec(err.field);
      if (m) setLocale(m[1]);
      if (!err.field) toast(err.message, "error");
    } finally {
      setBusy(false);
    }
  };
  const discard = () => { setDraft(draftOf(saved)); setError(null); };

  const rotate = async (channel) => {
    const link = channel === "link";
    const ok = await confirm({
      title: link ? "Rotate the chat link?" : "Rotate the widget token?",
      message: link
        ? "The current link stops working at once, and chats visitors started through it end now. Share the new link afterwards."
        : "The current widget token stops working at once: sites still using it show the widget as unavailable, and chats visitors started through it end now. Update the snippet on your sites afterwards.",
      confirmLabel: link ? "Rotate link" : "Rotate token",
      danger: true,
    });
    if (!ok) return;
    try {
      const next = await post(`${PATH}/${link ? "anonymous-chat-token" : "website-embed-token"}/rotate`);
      // unsaved edits stay: only the token (and the saved state) changes
      setSaved(next);
      toast(link ? "New chat link. The old one no longer works." : "New widget token. Update the snippet on your sites.");
    } catch (err) {
      toast(err.message, "error");
    }
  };

  const fe = (name) => fieldError(error, name);
  return html`<div class="page ch-page" data-testid="channels-page">
    <${PageHeader} title="Public chat & widget"
      subtitle="How visitors reach the workspace's default agent without signing in: a chat link you share, and a chat widget on your website. Changes apply as soon as you save." />
    <form onSubmit=${save} novalidate class="ch-layout" data-testid="channels-form">
      <div class="ch-main">
        ${!manage && html`<div class="alert alert-info" role="status" data-testid="ch-read-only">
          You can see these settings; changing them needs the permission to manage workspace settings.</div>`}
        <${FormError} error=${error} fields=${["anonymousChatEnabled", "assistantName", "greetingInstruction", "assistantDefaultLocale", "proactiveGreetingEnabled",
          "websiteEmbedEnabled", "websiteEmbedAllowedOrigins", "websiteEmbedLauncherLabel", "websiteEmbedLauncherPosition", "websiteEmbedTheme", "websiteEmbedCopy",
          "publicChatVisitorMessagesPerMinute", "publicChatVisitorMessagesPerDay"]} />
        <${LinkCard} draft=${draft} saved=${saved} set=${set} ro=${ro} manage=${manage} rotate=${() => rotate("link")} />
        <${WidgetCard} draft=${draft} saved=${saved} set=${set} ro=${ro} manage=${manage} error=${error} dirty=${dirty} rotate=${() => rotate("widget")} />
        <${AppearanceCard} draft=${draft} set=${set} ro=${ro} fe=${fe} />
        <${CopyCard} draft=${draft} set=${set} ro=${ro} error=${error} locale=${locale} setLocale=${setLocale} />
        <${GreetingCard} draft=${draft} set=${set} ro=${ro} fe=${fe} agentName=${defaultAgent ? defaultAgent.name : ""} />
        <${LimitsCard} draft=${draft} set=${set} ro=${ro} fe=${fe} />
        ${manage && html`<div class="form-actions sticky-actions ch-savebar">
          <span class=${"ch-dirty" + (dirty ? " on" : "")} role="status" data-testid="ch-dirty">${dirty ? "Unsaved changes" : "All changes saved"}</span>
          <${Button} onClick=${discard} disabled=${!dirty || busy} testid="ch-discard">Discard changes</${Button}>
          <${Button} type="submit" variant="primary" busy=${busy} disabled=${!dirty} testid="ch-save">Save</${Button}>
        </div>`}
      </div>
      <div class="ch-side">
        <${Preview} draft=${draft} saved=${saved} locale=${locale} agentName=${defaultAgent ? defaultAgent.name : ""} />
      </div>
    </form>
  </div>`;
}

// ---------------------------------------------------------------- 1. the anonymous link

function LinkCard({ draft, saved, set, ro, manage, rotate }) {
  const id = useId("link");
  const link = `${location.origin}/chat/${saved.anonymousChatToken}`;
  const live = saved.anonymousChatEnabled;
  return html`<${Card} title="Anonymous chat link" testid="ch-link-card"
    actions=${html`<${Badge} tone=${live ? "green" : "gray"} testid="ch-link-status">${live ? "on" : "off"}</${Badge}>`}>
    <${Switch} label="Anyone with the link can chat" checked=${draft.anonymousChatEnabled} disabled=${ro} testid="ch-link-enabled"
      onChange=${(v) => set("anonymousChatEnabled", v)}
      hint="A full-page chat with the default agent; no sign-in. Share it by email, on social media or as a QR code." />
    <div class="field">
      <label for=${id}>Chat link</label>
      <div class="ch-copy-row">
        <input id=${id} type="text" readonly class="mono" value=${link} data-testid="ch-link" onFocus=${(e) => e.currentTarget.select()} />
        <${CopyButton} text=${link} what="the chat link" testid="ch-link-copy" />
        <a class="btn btn-small" href=${link} target="_blank" rel="noopener noreferrer" data-testid="ch-link-open">Open<span class="sr-only"> the chat link in a new tab</span></a>
      </div>
      ${!live && html`<p class="hint">The link answers only while the switch is on and saved.</p>`}
    </div>
    <div class="ch-token-foot">
      <${LastUsed} at=${saved.anonymousChatLastUsedAt} testid="ch-link-last-used" />
      ${manage && html`<${Button} small variant="danger" onClick=${rotate} testid="ch-link-rotate">Rotate link…</${Button}>`}
    </div>
  </${Card}>`;
}

// ---------------------------------------------------------------- 2. the website widget

function WidgetCard({ draft, saved, set, ro, manage, error, dirty, rotate }) {
  const origins = draft.websiteEmbedAllowedOrigins;
  const live = saved.websiteEmbedEnabled;
  const snippet = snippetOf(location.origin, saved);
  const snippetId = useId("snippet");
  return html`<${Card} title="Website widget" testid="ch-widget-card"
    actions=${html`<${Badge} tone=${live ? "green" : "gray"} testid="ch-widget-status">${live ? "on" : "off"}</${Badge}>`}>
    <${Switch} label="Show the chat widget on your website" checked=${draft.websiteEmbedEnabled} disabled=${ro} testid="ch-widget-enabled"
      onChange=${(v) => set("websiteEmbedEnabled", v)}
      hint="A chat button in the corner of your pages that opens a chat with the default agent." />
    ${draft.websiteEmbedEnabled && !origins.length && html`<div class="alert alert-warn" role="status" data-testid="ch-no-origins">
      <strong>No site is allowed yet.</strong> The widget is refused everywhere until you add your site's origin below.
    </div>`}
    <${Origins} origins=${origins} onChange=${(v) => set("websiteEmbedAllowedOrigins", v)} ro=${ro} error=${error} />
    <div class="field">
      <div class="ch-label-row">
        <label for=${snippetId}>Embed snippet</label>
        <${CopyButton} text=${snippet} what="the embed snippet" testid="ch-snippet-copy" />
      </div>
      <textarea id=${snippetId} class="mono ch-snippet" readonly rows=${snippet.split("\n").length} spellcheck="false" value=${snippet}
        data-testid="ch-snippet" onFocus=${(e) => e.currentTarget.select()}></textarea>
      <p class="hint">Paste it before <code>${"</body>"}</code> on every page that should show the widget.
        ${dirty ? " It shows the saved settings: save to include your changes." : ""}</p>
    </div>
    <div class="ch-token-foot">
      <${LastUsed} at=${saved.websiteEmbedLastUsedAt} testid="ch-widget-last-used" />
      ${manage && html`<${Button} small variant="danger" onClick=${rotate} testid="ch-widget-rotate">Rotate token…</${Button}>`}
    </div>
    ${Object.keys(saved.websiteEmbedExpertOverrides || {}).length > 0 && html`<p class="muted small">
      Expert overrides are set (${Object.keys(saved.websiteEmbedExpertOverrides).join(", ")}); change them through the API.</p>`}
  </${Card}>`;
}

/** The allowed origins: add, remove; the API's normalization errors next to the entry they name. */
function Origins({ origins, onChange, ro, error }) {
  const [text, setText] = useState("");
  const [local, setLocal] = useState(null);
  const inputId = useId("origin");
  const legendId = useId("origins");
  const apiError = namesField(error, "websiteEmbedAllowedOrigins") ? error.message : null;
  // the API names the refused entry in backticks: show the message on that entry (gone once the
  // entry is removed); a message naming none (too many) goes under the list
  const named = apiError && /`([^`]*)`/.exec(apiError);
  const badIndex = named ? origins.findIndex((o) => o.trim() === named[1].trim()) : -1;
  const full = origins.length >= MAX_ORIGINS;
  const add = () => {
    const v = text.trim();
    if (!v) return;
    if (origins.some((o) => o.trim() === v || (normalizedOrigin(o) && normalizedOrigin(o) === normalizedOrigin(v)))) {
      setLocal(`${v} is already in the list.`);
      return;
    }
    onChange([...origins, v]);
    setText("");
    setLocal(null);
  };
  return html`<fieldset class="ch-origins" aria-describedby=${legendId + "-hint"} data-testid="ch-origins">
    <legend id=${legendId}>Allowed origins</legend>
    <p class="hint" id=${legendId + "-hint"}>The sites that may show the widget, as <code>scheme://host[:port]</code>, e.g. <code>https://www.example.com</code>.${" "}
      <code>*</code> admits any site. Up to ${MAX_ORIGINS}.</p>
    ${origins.length ? html`<ul class="ch-origin-list">
      ${origins.map((o, i) => {
        const norm = normalizedOrigin(o);
        const err = i === badIndex ? apiError : null;
        const errId = `${legendId}-err-${i}`;
        return html`<li key=${o + i} class=${"ch-origin" + (err ? " has-error" : "")} data-testid="ch-origin" data-origin=${o}>
          <span class="ch-origin-text"><code>${o}</code>
            ${norm && norm !== o.trim() && !err && html`<span class="muted small"> saved as <code>${norm}</code></span>`}
            ${o.trim() === "*" && html`<span class="muted small"> any site</span>`}
          </span>
          ${!ro && html`<${Button} small variant="ghost" onClick=${() => onChange(origins.filter((_, j) => j !== i))} testid="ch-origin-remove"
            aria-label=${`Remove ${o}`} aria-describedby=${err ? errId : undefined}>Remove</${Button}>`}
          ${err && html`<p class="field-error" id=${errId} role="alert" data-testid="field-error">${err}</p>`}
        </li>`;
      })}
    </ul>` : html`<p class="muted small" data-testid="ch-origins-empty">No origins yet.</p>`}
    ${origins.some((o) => o.trim() === "*") && html`<p class="hint" data-testid="ch-origins-any"><code>*</code> lets any website embed your widget.</p>`}
    ${!ro && html`<div class="ch-add-row">
      <label class="sr-only" for=${inputId}>Add an origin</label>
      <input id=${inputId} type="text" value=${text} placeholder="https://www.example.com" disabled=${full} data-testid="ch-origin-input"
        autocomplete="off" spellcheck="false" aria-invalid=${local ? "true" : undefined} aria-describedby=${local ? inputId + "-err" : undefined}
        onInput=${(e) => { setText(e.currentTarget.value); setLocal(null); }}
        onKeyDown=${(e) => { if (e.key === "Enter") { e.preventDefault(); add(); } }} />
      <${Button} onClick=${add} disabled=${full || !text.trim()} testid="ch-origin-add">Add origin</${Button}>
    </div>`}
    ${local && html`<p class="field-error" id=${inputId + "-err"} role="alert">${local}</p>`}
    ${full && !ro && html`<p class="hint">The list is full (${MAX_ORIGINS} origins).</p>`}
    ${apiError && !named && html`<p class="field-error" role="alert" data-testid="ch-origins-error">${apiError}</p>`}
  </fieldset>`;
}

// ---------------------------------------------------------------- launcher and colours

function ColorField({ label, hint, value, onChange, error, disabled, testid }) {
  const id = useId("color");
  const valid = HEX.test(value);
  const err = error || (valid ? null : "A 6-digit hex colour like #0f172a");
  const desc = [hint && id + "-hint", err && id + "-err"].filter(Boolean).join(" ") || undefined;
  return html`<div class=${"field ch-color" + (err ? " has-error" : "")}>
    <label for=${id}>${label}</label>
    <div class="ch-color-row">
      <input type="color" class="ch-color-picker" value=${valid ? value.toLowerCase() : "#000000"} disabled=${disabled}
        aria-label=${label + " (colour picker)"} data-testid=${testid + "-picker"} onInput=${(e) => onChange(e.currentTarget.value)} />
      <input id=${id} type="text" class="mono" value=${value} maxlength="7" spellcheck="false" autocomplete="off" disabled=${disabled}
        aria-invalid=${err ? "true" : undefined} aria-describedby=${desc} data-testid=${testid}
        onInput=${(e) => { const v = e.currentTarget.value.trim(); onChange(/^[0-9a-fA-F]{6}$/.test(v) ? "#" + v : v); }} />
    </div>
    ${hint && html`<p class="hint" id=${id + "-hint"}>${hint}</p>`}
    ${err && html`<p class="field-error" id=${id + "-err"} data-testid="field-error">${err}</p>`}
  </div>`;
}

function AppearanceCard({ draft, set, ro, fe }) {
  const t = draft.websiteEmbedTheme;
  const setColor = (k, v) => set("websiteEmbedTheme", { ...t, [k]: v });
  const onBrand = contrast(t.brandText, t.brand);
  const onPanel = contrast(t.text, t.surface);
  const label = draft.websiteEmbedLauncherLabel;
  return html`<${Card} title="Launcher and colours" testid="ch-appearance-card">
    <div class="form-grid">
      <${Input} label="Launcher label" name="websiteEmbedLauncherLabel" value=${label} maxlength="80" disabled=${ro} testid="ch-label"
        error=${fe("websiteEmbedLauncherLabel") || (label.trim() ? null : "The launcher needs a label (1 to 80 characters).")}
        hint=${`The button visitors click to open the chat. ${label.length}/80`}
        onInput=${(e) => set("websiteEmbedLauncherLabel", e.currentTarget.value)} />
      <${Select} label="Launcher position" name="websiteEmbedLauncherPosition" value=${draft.websiteEmbedLauncherPosition} disabled=${ro} testid="ch-position"
        error=${fe("websiteEmbedLauncherPosition")} options=${[["bottom-right", "Bottom right"], ["bottom-left", "Bottom left"]]}
        onChange=${(e) => set("websiteEmbedLauncherPosition", e.currentTarget.value)} />
    </div>
    <div class="ch-colors">
      ${THEME_FIELDS.map(([k, label, hint]) => html`<${ColorField} key=${k} label=${label} hint=${hint} value=${t[k]} disabled=${ro}
        error=${fe("websiteEmbedTheme." + k) || (k === "brand" ? fe("websiteEmbedTheme") : null)} testid=${"ch-color-" + k} onChange=${(v) => setColor(k, v)} />`)}
    </div>
    ${onBrand !== null && onBrand < 4.5 && html`<div class="alert alert-warn" role="status" data-testid="ch-contrast-brand">
      <strong>Hard to read:</strong> text on the brand colour has a contrast of ${onBrand.toFixed(2)}:1; at least 4.5:1 is needed for readable text.
    </div>`}
    ${onPanel !== null && onPanel < 4.5 && html`<div class="alert alert-warn" role="status" data-testid="ch-contrast-panel">
      <strong>Hard to read:</strong> the panel text has a contrast of ${onPanel.toFixed(2)}:1 on its background; at least 4.5:1 is needed.
    </div>`}
  </${Card}>`;
}

// ---------------------------------------------------------------- the widget's texts

function CopyCard({ draft, set, ro, error, locale, setLocale }) {
  const [newLocale, setNewLocale] = useState("");
  const [localErr, setLocalErr] = useState(null);
  const [added, setAdded] = useState(null);
  const newId = useId("locale");
  const locales = localesOf(draft, added);
  const texts = draft.websiteEmbedCopy[locale] || {};
  const en = locale === "en" ? {} : draft.websiteEmbedCopy.en || {};
  const fallback = (k) => (typeof en[k] === "string" && en[k].trim()) || BUILT_IN[k] || (k === "title" ? "The assistant's name" : "");
  const setText = (k, v) => set("websiteEmbedCopy", { ...draft.websiteEmbedCopy, [locale]: { ...texts, [k]: v } });
  const copyErr = error && error.field && error.field.startsWith("websiteEmbedCopy") ? error.message : null;
  const overridden = COPY_KEYS.filter(([k]) => typeof texts[k] === "string" && texts[k].trim()).length;
  const addLocale = () => {
    const v = newLocale.trim();
    if (!v) return;
    if (!LOCALE.test(v)) { setLocalErr("A language tag like en, de, pt-BR or zh-Hant-TW."); return; }
    setAdded(v);
    setLocale(v);
    setNewLocale("");
    setLocalErr(null);
  };
  return html`<${Card} title="Widget text" testid="ch-copy-card">
    <p class="muted">Change what the widget says, per language. A blank field uses the English text (shown in grey); a blank title shows the assistant's name.</p>
    <div class="ch-locale-row">
      <${Select} label="Language" name="copyLocale" value=${locale} options=${locales} className="field-inline" testid="ch-copy-locale"
        onChange=${(e) => setLocale(e.currentTarget.value)} />
      ${!ro && html`<div class="field field-inline">
        <label for=${newId}>Add a language</label>
        <div class="ch-add-row">
          <input id=${newId} type="text" value=${newLocale} placeholder="e.g. de, pt-BR" autocomplete="off" spellcheck="false" data-testid="ch-copy-new-locale"
            aria-invalid=${localErr ? "true" : undefined} aria-describedby=${localErr ? newId + "-err" : undefined}
            onInput=${(e) => { setNewLocale(e.currentTarget.value); setLocalErr(null); }}
            onKeyDown=${(e) => { if (e.key === "Enter") { e.preventDefault(); addLocale(); } }} />
          <${Button} onClick=${addLocale} disabled=${!newLocale.trim()} testid="ch-copy-add-locale">Add</${Button}>
        </div>
      </div>`}
      <span class="muted small ch-count" data-testid="ch-copy-count">${overridden ? `${overridden} of ${COPY_KEYS.length} texts changed` : "All built-in"}</span>
    </div>
    ${localErr && html`<p class="field-error" id=${newId + "-err"} role="alert">${localErr}</p>`}
    ${copyErr && html`<p class="field-error ch-copy-error" role="alert" data-testid="ch-copy-error">${copyErr}</p>`}
    <div class="form-grid ch-copy-grid">
      ${COPY_KEYS.map(([k, label]) => html`<${Input} key=${locale + k} label=${label} name=${"copy-" + k} value=${texts[k] ?? ""} placeholder=${fallback(k)}
        maxlength="500" disabled=${ro} testid=${"ch-copy-" + k} onInput=${(e) => setText(k, e.currentTarget.value)} />`)}
    </div>
  </${Card}>`;
}

// ---------------------------------------------------------------- 3. the greeting

function GreetingCard({ draft, set, ro, fe, agentName }) {
  const loc = draft.assistantDefaultLocale.trim();
  return html`<${Card} title="Greeting" testid="ch-greeting-card">
    <div class="form-grid">
      <${Input} label="Assistant name" name="assistantName" value=${draft.assistantName} maxlength="200" disabled=${ro} testid="ch-assistant-name"
        error=${fe("assistantName")} placeholder=${agentName || "e.g. Ada"} hint="The chat's title when no title text is set. Blank: the default agent's name."
        onInput=${(e) => set("assistantName", e.currentTarget.value)} />
      <${Input} label="Default language" name="assistantDefaultLocale" value=${draft.assistantDefaultLocale} maxlength="35" disabled=${ro} testid="ch-default-locale"
        error=${fe("assistantDefaultLocale") || (loc && !LOCALE.test(loc) ? "A language tag like en, de-CH or zh-Hant-TW." : null)}
        placeholder="e.g. en, de-CH" hint="Used when the visitor's browser language is unknown. Blank: follow the visitor."
        onInput=${(e) => set("assistantDefaultLocale", e.currentTarget.value)} />
    </div>
    <${TextArea} label="Greeting instruction" name="greetingInstruction" value=${draft.greetingInstruction} rows="2" maxlength="200" disabled=${ro}
      testid="ch-greeting" error=${fe("greetingInstruction")}
      hint=${`What the first message should do, e.g. “Welcome visitors to Acme support and offer help with orders.” ${draft.greetingInstruction.length}/200`}
      onInput=${(e) => set("greetingInstruction", e.currentTarget.value)} />
    <${Switch} label="Greet visitors first" checked=${draft.proactiveGreetingEnabled} disabled=${ro} testid="ch-proactive"
      onChange=${(v) => set("proactiveGreetingEnabled", v)}
      hint="The assistant opens the conversation with a greeting instead of waiting for the visitor's first message." />
  </${Card}>`;
}

/** A whole number from `min` to `max` typed in an input, or blank. */
function rangeError(text, min, max) {
  const v = text.trim();
  if (v === "") return null;
  const n = Number(v);
  return Number.isInteger(n) && n >= min && n <= max ? null : `A whole number from ${min} to ${max.toLocaleString("en")}, or blank.`;
}

function LimitsCard({ draft, set, ro, fe }) {
  const minute = "publicChatVisitorMessagesPerMinute", day = "publicChatVisitorMessagesPerDay";
  return html`<${Card} title="Visitor limits" testid="ch-limits-card">
    <p class="muted small">How many messages one visitor may send on the chat link and the widget. A visitor over a limit is
      asked to wait (HTTP 429 with Retry-After); these limits are separate from the account's monthly usage.</p>
    <div class="form-grid">
      <${Input} label="Messages per minute" name=${minute} type="number" inputmode="numeric" min="0" max="600" step="1"
        value=${draft[minute]} disabled=${ro} testid="ch-limit-minute" error=${fe(minute) || rangeError(draft[minute], 0, 600)}
        placeholder="Server default" hint="Blank: the server's default. 0: no per-minute limit."
        onInput=${(e) => set(minute, e.currentTarget.value)} />
      <${Input} label="Messages per day" name=${day} type="number" inputmode="numeric" min="1" max="100000" step="1"
        value=${draft[day]} disabled=${ro} testid="ch-limit-day" error=${fe(day) || rangeError(draft[day], 1, 100000)}
        placeholder="No daily limit" hint="Counted per visitor from midnight UTC. Blank: no daily limit."
        onInput=${(e) => set(day, e.currentTarget.value)} />
    </div>
  </${Card}>`;
}

// ---------------------------------------------------------------- 4. the live preview

/** A picture of the widget from the unsaved form: nothing in it is focusable or read out. */
function Preview({ draft, saved, locale, agentName }) {
  const t = draft.websiteEmbedTheme;
  const base = { ...DEFAULT_THEME, ...(saved.websiteEmbedTheme || {}) };
  const color = (k) => (HEX.test(t[k]) ? t[k] : base[k]);
  // as the widget: the language's text, else the English override, else the built-in text
  const pick = (m, k) => (m && typeof m[k] === "string" && m[k].trim()) || "";
  const text = (k) => pick(draft.websiteEmbedCopy[locale], k) || pick(draft.websiteEmbedCopy.en, k) || BUILT_IN[k];
  const title = text("title") || draft.assistantName.trim() || agentName || "Chat";
  const hidePoweredBy = (saved.websiteEmbedExpertOverrides || {}).hidePoweredBy === true;
  const label = draft.websiteEmbedLauncherLabel.trim() || saved.websiteEmbedLauncherLabel;
  const position = draft.websiteEmbedLauncherPosition === "bottom-left" ? "bottom-left" : "bottom-right";
  const vars = { "--ch-brand": color("brand"), "--ch-brand-text": color("brandText"), "--ch-surface": color("surface"), "--ch-text": color("text") };
  return html`<${Card} title="Live preview" testid="ch-preview" className="ch-preview-card">
    <p class="muted small ch-preview-note">Updates as you type, before you save. Texts in ${locale}.</p>
    <div class=${"ch-stage ch-" + position} role="img" style=${vars} data-testid="ch-preview-stage" data-position=${position}
      aria-label=${`Widget preview: the “${label}” launcher at the ${position.replace("-", " ")} and the open chat panel.`}>
      <div class="ch-stage-inner" aria-hidden="true" inert>
        <div class="ch-site"><span></span><span></span><span class="short"></span><span></span><span class="short"></span></div>
        <div class="ch-panel" data-testid="ch-preview-panel">
          <div class="ch-panel-head">
            <div class="ch-panel-titles">
              <div class="ch-panel-title" data-testid="ch-preview-title">${title}</div>
              <div class="ch-panel-sub" data-testid="ch-preview-subtitle">${text("subtitle")}</div>
            </div>
            <span class="ch-panel-x">×</span>
          </div>
          <div class="ch-panel-body">
            <div class="ch-bubble ch-bubble-agent" data-testid="ch-preview-agent">Hello! I can answer questions about our products, orders and returns. How can I help?</div>
            <div class="ch-bubble ch-bubble-visitor" data-testid="ch-preview-visitor">Can I return an item I bought last week?</div>
          </div>
          <div class="ch-panel-compose">
            <span class="ch-fake-input" data-testid="ch-preview-placeholder">${text("placeholder")}</span>
            <span class="ch-fake-send" data-testid="ch-preview-send">${text("send")}</span>
          </div>
          ${!hidePoweredBy && html`<div class="ch-powered">${text("poweredBy")}</div>`}
        </div>
        <div class="ch-launcher" data-testid="ch-preview-launcher">
          <svg viewBox="0 0 24 24" width="18" height="18" aria-hidden="true" focusable="false"><path fill="currentColor"
            d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z" /></svg>
          <span>${label}</span>
        </div>
      </div>
    </div>
    ${!draft.websiteEmbedEnabled && html`<p class="hint mt" data-testid="ch-preview-off">The widget is off: sites show nothing until you turn it on and save.</p>`}
  </${Card}>`;
}
