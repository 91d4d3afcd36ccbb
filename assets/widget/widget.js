/*
 * Steward chat: the chat itself. Two hosts use it:
 *  - the website embed: embed.js draws the launcher in a shadow root, loads this file on the
 *    first click (or at once with data-proactive) and calls window.__stewardWidget.mount(ctx);
 *  - the anonymous link's full page (/chat/<token>, page.html): loaded with data-mode="page", it
 *    mounts itself with no launcher and the panel filling the page (channel anonymous_link).
 *
 * Copy keys: embed-config `copy.<locale>.<key>` overrides the English defaults below. The locale is
 * data-locale, else navigator.language exactly, else its base language, else "en".
 *   title, subtitle, placeholder, send, close, open (the launcher's accessible name),
 *   unavailable, handoff, newMessages ("{n}" = count), error, retry, sources, feedbackUp,
 *   feedbackDown, feedbackThanks, poweredBy; and tooMany ("{s}" = seconds), feedbackComment,
 *   feedbackSend, team ("{name}" = the operator's display name), messages (the log's label),
 *   privacy, dismiss, approvalWait (a routine waits for a person's review), needed ("{fields}" =
 *   what a routine still needs).
 *
 * Rules this file keeps: text from visitors, agents, operators and settings is only ever set as
 * textContent (no innerHTML); no inline style (constructed stylesheets and CSSOM custom
 * properties only), so it runs under a host's strict CSP; streams through fetch + a
 * ReadableStream SSE parser (not EventSource) so the session header is sent; one global,
 * window.__stewardWidget.
 */
(() => {
  'use strict';
  if (window.__stewardWidget) return;

  const COPY = {
    title: '',
    subtitle: 'Ask us anything.',
    placeholder: 'Type your message…',
    send: 'Send',
    close: 'Close chat',
    open: 'Open chat',
    unavailable: 'The chat is not available right now.',
    handoff: 'A person will reply here soon.',
    newMessages: '{n} unread messages',
    error: 'Something went wrong. Your message was not answered.',
    retry: 'Try again',
    sources: 'Sources',
    feedbackUp: 'Helpful',
    feedbackDown: 'Not helpful',
    feedbackThanks: 'Thanks for your feedback.',
    poweredBy: 'Powered by Steward',
    tooMany: 'Too many messages, try again in {s} s.',
    approvalWait: 'Your request is waiting for a review. The answer will appear here.',
    needed: 'Still needed: {fields}',
    feedbackComment: 'What was missing? (optional)',
    feedbackSend: 'Send feedback',
    team: '{name} (team)',
    messages: 'Messages',
    privacy: 'Privacy policy',
    dismiss: 'Dismiss',
  };

  const STYLE = `
:host{all:initial!important;display:block!important;position:fixed!important;inset:auto!important;
  width:0!important;height:0!important;z-index:2147483000!important;visibility:visible!important;
  --steward-brand:#0f172a;--steward-brand-text:#f8fafc;--steward-surface:#ffffff;--steward-text:#0f172a}
[hidden]{display:none!important}
.root{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--steward-text);
  --muted:color-mix(in srgb,var(--steward-text) 74%,var(--steward-surface));
  --line:color-mix(in srgb,var(--steward-text) 14%,var(--steward-surface));
  --line-strong:color-mix(in srgb,var(--steward-text) 45%,var(--steward-surface));
  --bubble:color-mix(in srgb,var(--steward-text) 7%,var(--steward-surface));
  --tint:color-mix(in srgb,var(--steward-brand) 10%,var(--steward-surface))}
.root *,.root *::before,.root *::after{box-sizing:border-box}
button,textarea{font:inherit;color:inherit;margin:0}
button{cursor:pointer}
svg{width:20px;height:20px;fill:currentColor;flex:none}
:focus{outline:none}
:focus-visible{outline:2px solid var(--steward-brand);outline-offset:2px}
.sr{position:absolute!important;width:1px;height:1px;margin:-1px;padding:0;border:0;overflow:hidden;clip:rect(0 0 0 0);clip-path:inset(50%);white-space:nowrap}
.panel{position:fixed;right:20px;bottom:84px;width:380px;height:min(640px,calc(100vh - 108px));display:flex;flex-direction:column;
  background:var(--steward-surface);color:var(--steward-text);border:1px solid var(--line);border-radius:16px;
  box-shadow:0 16px 48px rgba(15,23,42,.28);overflow:hidden}
.left .panel,.left .teaser{left:20px;right:auto}
.head{display:flex;align-items:center;gap:10px;padding:12px 10px 12px 16px;background:var(--steward-brand);color:var(--steward-brand-text)}
.logo{width:34px;height:34px;border-radius:8px;object-fit:cover;flex:none;background:var(--steward-surface)}
.titles{flex:1;min-width:0}
.title{margin:0;font-size:16px;font-weight:650;line-height:1.3;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.sub{margin:2px 0 0;font-size:13px;line-height:1.35}
.x{display:inline-flex;align-items:center;justify-content:center;width:40px;height:40px;border:0;border-radius:10px;background:transparent;color:inherit}
.x:hover{background:rgba(255,255,255,.14)}
.head :focus-visible{outline-color:var(--steward-brand-text);outline-offset:-3px}
.log{flex:1;overflow-y:auto;overscroll-behavior:contain;padding:16px;display:flex;flex-direction:column;gap:10px}
.log:focus-visible{outline-offset:-3px}
.msg{display:flex;flex-direction:column;align-items:flex-start;max-width:86%;align-self:flex-start}
.msg.me{align-self:flex-end;align-items:flex-end}
.who{font-size:12px;font-weight:600;color:var(--muted);margin:0 4px 3px}
.bubble{padding:9px 13px;border-radius:16px 16px 16px 4px;background:var(--bubble);white-space:pre-wrap;overflow-wrap:anywhere}
.me .bubble{background:var(--steward-brand);color:var(--steward-brand-text);border-radius:16px 16px 4px 16px}
.op .bubble{background:var(--tint);border:1px solid color-mix(in srgb,var(--steward-brand) 30%,var(--steward-surface))}
.failed .bubble{opacity:.7}
.dots{display:inline-flex;gap:4px;padding:4px 0}
.dots i{width:7px;height:7px;border-radius:50%;background:var(--muted);opacity:.4}
@media (prefers-reduced-motion:no-preference){.dots i{animation:blink 1.2s infinite}.dots i:nth-child(2){animation-delay:.2s}.dots i:nth-child(3){animation-delay:.4s}}
@keyframes blink{30%{opacity:1}}
.sources{margin:6px 4px 0;font-size:13px;color:var(--muted)}
.sources ul{margin:2px 0 0;padding:0 0 0 18px}
.sources li{margin:1px 0;overflow-wrap:anywhere}
.fb{display:flex;align-items:center;gap:2px;margin:4px 0 0 0;flex-wrap:wrap;font-size:13px;color:var(--muted)}
.fb button{display:inline-flex;align-items:center;justify-content:center;width:32px;height:32px;border:0;border-radius:8px;background:transparent;color:var(--muted)}
.fb button svg{width:17px;height:17px}
.fb button:hover{background:var(--bubble);color:var(--steward-text)}
.fb button[aria-pressed=true]{color:var(--steward-text);background:var(--bubble)}
.fb form{display:flex;gap:6px;width:100%;margin-top:4px}
.fb textarea{flex:1;min-width:0;font-size:16px;padding:6px 10px;border:1px solid var(--line-strong);border-radius:8px;background:var(--steward-surface);color:var(--steward-text);resize:none}
.fb form button{width:auto;padding:0 10px;border:1px solid var(--line-strong);color:var(--steward-text)}
.chips{display:flex;flex-wrap:wrap;gap:6px;align-self:stretch}
.chip{padding:6px 12px;min-height:34px;border:1px solid var(--steward-brand);border-radius:17px;background:var(--steward-surface);color:var(--steward-text);font-size:14px;text-align:left}
.chip:hover{background:var(--tint)}
.notice{margin:0;padding:8px 16px;background:var(--tint);border-top:1px solid var(--line);font-size:14px}
.err{align-self:stretch;display:flex;align-items:center;justify-content:space-between;gap:10px;padding:8px 12px;border-radius:10px;
  background:#fef2f2;color:#991b1b;font-size:14px;border:1px solid #fecaca}
.err button{flex:none;padding:4px 12px;min-height:32px;border:1px solid #991b1b;border-radius:8px;background:#fff;color:#991b1b;font-weight:600}
.state{margin:auto;padding:24px;text-align:center;color:var(--muted)}
.composer{display:flex;gap:8px;align-items:flex-end;padding:10px 12px;border-top:1px solid var(--line);background:var(--steward-surface)}
.composer textarea{flex:1;min-width:0;min-height:44px;max-height:140px;padding:10px 12px;font-size:16px;line-height:1.4;
  border:1px solid var(--line-strong);border-radius:12px;background:var(--steward-surface);color:var(--steward-text);resize:none;overflow-y:auto}
.composer textarea::placeholder{color:var(--muted);opacity:1}
.composer textarea:focus-visible{outline-offset:0;border-color:var(--steward-brand)}
.send{display:inline-flex;align-items:center;justify-content:center;width:44px;height:44px;border:0;border-radius:12px;background:var(--steward-brand);color:var(--steward-brand-text)}
.foot{margin:0;padding:2px 12px 8px;text-align:center;font-size:12px;color:var(--muted);background:var(--steward-surface)}
.foot a{color:inherit}
.foot span+a::before{content:"· ";display:inline-block;white-space:pre}
.teaser{position:fixed;right:20px;bottom:84px;max-width:min(300px,calc(100vw - 40px));display:flex;align-items:flex-start;
  background:var(--steward-surface);color:var(--steward-text);border:1px solid var(--line);border-radius:14px;box-shadow:0 8px 28px rgba(15,23,42,.2)}
.teaser .say{flex:1;padding:12px 4px 12px 14px;border:0;background:transparent;text-align:left;border-radius:14px;font-size:14px}
.teaser .x{width:36px;height:36px;margin:4px;color:var(--muted)}
.page .panel{inset:0;width:auto;height:auto;border:0;border-radius:0;box-shadow:none}
.page .head,.page .log,.page .composer,.page .notice{padding-left:max(16px,calc((100% - 760px)/2));padding-right:max(16px,calc((100% - 760px)/2))}
@media (max-width:480px){
  .root:not(.page) .panel{inset:0;width:auto;height:auto;border:0;border-radius:0}
  .root.open .launcher{display:none}
}
`;

  const SVG = 'http://www.w3.org/2000/svg';
  const ICONS = {
    x: 'M6.4 5 5 6.4l5.6 5.6L5 17.6 6.4 19l5.6-5.6 5.6 5.6 1.4-1.4-5.6-5.6L19 6.4 17.6 5 12 10.6z',
    send: 'M12 4 4.9 11.1l1.4 1.4L11 7.8V20h2V7.8l4.7 4.7 1.4-1.4z',
    up: 'M2 21h4V9H2zm20-11a2 2 0 0 0-2-2h-6.3l1-4.6v-.3c0-.4-.2-.8-.4-1.1L13.2 1 6.6 7.6C6.2 8 6 8.5 6 9v10a2 2 0 0 0 2 2h9c.8 0 1.5-.5 1.8-1.2l3-7.1c.1-.2.2-.5.2-.7z',
    down: 'M15 3H6c-.8 0-1.5.5-1.8 1.2l-3 7.1c-.1.2-.2.5-.2.7v2a2 2 0 0 0 2 2h6.3l-1 4.6v.3c0 .4.2.8.4 1.1l1.1 1 6.6-6.6c.4-.4.6-.9.6-1.4V5a2 2 0 0 0-2-2zm4 0v12h4V3z',
  };

  /** An element: props are attributes, except class, text and on* listeners; kids are nodes or text. */
  function h(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k !== 'style') e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of kids.flat()) if (c != null && c !== false) e.append(c);
    return e;
  }

  function icon(name) {
    const s = document.createElementNS(SVG, 'svg');
    s.setAttribute('viewBox', '0 0 24 24');
    s.setAttribute('aria-hidden', 'true');
    s.setAttribute('focusable', 'false');
    const p = document.createElementNS(SVG, 'path');
    p.setAttribute('d', ICONS[name]);
    s.append(p);
    return s;
  }

  const fill = (s, k, v) => String(s).split('{' + k + '}').join(String(v));
  const hex = (v) => typeof v === 'string' && /^#[0-9a-fA-F]{6}$/.test(v);
  const wait = (ms) => new Promise((r) => setTimeout(r, ms));

  class HttpError extends Error {
    constructor(status, err, retryAfter) {
      super((err && err.message) || 'HTTP ' + status);
      this.status = status;
      this.code = err && err.code;
      this.details = err && err.details;
      this.retryAfter = retryAfter;
    }
  }

  /** Server-sent events from a fetch response: yields {event, data} until the stream ends. */
  async function* sse(res) {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let event = '';
    let data = [];
    for (;;) {
      const { value, done } = await reader.read();
      buf += done ? dec.decode() : dec.decode(value, { stream: true });
      let i;
      while ((i = buf.search(/\r\n|\n|\r/)) >= 0) {
        if (buf[i] === '\r' && i === buf.length - 1 && !done) break; // maybe \r\n split across reads
        const line = buf.slice(0, i);
        buf = buf.slice(i + (buf.startsWith('\r\n', i) ? 2 : 1));
        if (line === '') {
          if (data.length) yield { event: event || 'message', data: data.join('\n') };
          event = '';
          data = [];
        } else if (line[0] !== ':') {
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let val = c < 0 ? '' : line.slice(c + 1);
          if (val[0] === ' ') val = val.slice(1);
          if (field === 'event') event = val;
          else if (field === 'data') data.push(val);
        }
      }
      if (done) return;
    }
  }

  function pickLocale(copy, wanted) {
    const keys = Object.keys(copy || {});
    const find = (l) => l && keys.find((k) => k.toLowerCase() === l.toLowerCase());
    const base = (l) => l && l.split('-')[0];
    const nav = navigator.language;
    return find(wanted) || find(base(wanted)) || find(nav) || find(base(nav)) || null;
  }

  function createChat(ctx) {
    const { opts, host, shadow, root } = ctx;
    const launcher = ctx.launcher || null;
    const page = opts.mode === 'page';
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLE);
    shadow.adoptedStyleSheets = [...shadow.adoptedStyleSheets, sheet];
    const apiBase = opts.origin + '/api/v1/';
    const chatPath = 'public/chat/' + encodeURIComponent(opts.token);
    const storeKey = 'steward:' + opts.token;
    const memoryStore = {};
    const readStore = () => {
      try {
        return JSON.parse(localStorage.getItem(storeKey) || '{}') || {};
      } catch {
        return memoryStore;
      }
    };
    const stored = readStore();
    const S = {
      state: 'new', // new | loading | ready | failed | unavailable
      session: null,
      resume: typeof stored.resumeToken === 'string' ? stored.resumeToken : null,
      cid: typeof stored.conversationId === 'string' ? stored.conversationId : null,
      cursor: null,
      bootstrapActive: false,
      bootstrap: null,
      greetingText: '',
      known: new Set(),
      open: page,
      unread: 0,
      turns: new Set(),
      deferred: [],
      workspaceName: '',
      assistantName: '',
      proactive: true,
      initP: null,
      renewing: null,
      watching: null,
      teaserShown: false,
    };
    const writeStore = () => {
      const v = { resumeToken: S.resume, conversationId: S.cid };
      Object.assign(memoryStore, v);
      try {
        localStorage.setItem(storeKey, JSON.stringify(v));
      } catch {
        /* storage blocked: this page only */
      }
    };
    let copy = { ...COPY };

    // ---- the panel ----
    const titleEl = h(page ? 'h1' : 'h2', { class: 'title', 'data-testid': 'steward-title' });
    const subEl = h('p', { class: 'sub' });
    const logoSlot = h('span', { hidden: true });
    const closeBtn = page
      ? null
      : h('button', { type: 'button', class: 'x', 'data-testid': 'steward-close', onclick: () => close(true) }, icon('x'));
    const head = h('div', { class: 'head' }, logoSlot, h('div', { class: 'titles' }, titleEl, subEl), closeBtn);
    const log = h('div', {
      class: 'log',
      role: 'log',
      'aria-live': 'polite',
      tabindex: '0',
      'data-testid': 'steward-log',
    });
    const notice = h('p', { class: 'notice', role: 'status', hidden: true, 'data-testid': 'steward-handoff' });
    const input = h('textarea', {
      id: 'steward-input',
      rows: '1',
      enterkeyhint: 'send',
      maxlength: '4000',
      'data-testid': 'steward-input',
    });
    const inputLabel = h('label', { class: 'sr', for: 'steward-input' });
    const sendText = h('span', { class: 'sr' });
    const sendBtn = h('button', { type: 'submit', class: 'send', 'data-testid': 'steward-send' }, icon('send'), sendText);
    const form = h('form', { class: 'composer', 'data-testid': 'steward-composer' }, inputLabel, input, sendBtn);
    const powered = h('span', { 'data-testid': 'steward-powered' });
    const privacy = h('a', { target: '_blank', rel: 'noopener noreferrer', hidden: true });
    const foot = h('p', { class: 'foot' }, powered, privacy);
    const panel = h(
      'div',
      { class: 'panel', id: 'steward-panel', role: 'dialog', hidden: !page, 'data-testid': 'steward-panel' },
      head,
      log,
      notice,
      form,
      foot,
    );
    root.append(panel);
    if (page) root.classList.add('page');

    form.addEventListener('submit', (e) => {
      e.preventDefault();
      submit();
    });
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        submit();
      }
    });
    input.addEventListener('input', grow);
    root.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && S.open && !page) {
        e.preventDefault();
        close(true);
      }
    });

    function grow() {
      input.style.setProperty('height', 'auto');
      input.style.setProperty('height', Math.min(input.scrollHeight + 2, 140) + 'px');
    }

    function title() {
      return copy.title || S.assistantName || S.workspaceName || 'Chat';
    }

    function applyCopy() {
      titleEl.textContent = title();
      subEl.textContent = copy.subtitle;
      subEl.hidden = !copy.subtitle;
      panel.setAttribute('aria-label', title());
      log.setAttribute('aria-label', copy.messages);
      if (closeBtn) closeBtn.setAttribute('aria-label', copy.close);
      inputLabel.textContent = copy.placeholder;
      input.placeholder = copy.placeholder;
      sendText.textContent = copy.send;
      powered.textContent = copy.poweredBy;
      privacy.textContent = copy.privacy;
      if (notice.textContent) notice.textContent = copy.handoff;
      if (page) document.title = title();
      badge();
    }
    applyCopy();

    function applyConfig(c) {
      if (!c || typeof c !== 'object') return;
      const t = c.theme || {};
      // what the embed tag set wins (the launcher does not change once shown)
      for (const [k, v] of [
        ['brand', '--steward-brand'],
        ['brandText', '--steward-brand-text'],
        ['surface', '--steward-surface'],
        ['text', '--steward-text'],
      ]) {
        if (hex(t[k]) && !(k.startsWith('brand') && (opts.brand || opts.brandText))) host.style.setProperty(v, t[k]);
      }
      if (ctx.label && !opts.label && typeof c.launcherLabel === 'string' && c.launcherLabel.trim()) {
        ctx.label.textContent = c.launcherLabel.trim();
      }
      if (!opts.position && (c.launcherPosition === 'bottom-left' || c.launcherPosition === 'bottom-right')) {
        root.classList.toggle('left', c.launcherPosition === 'bottom-left');
      }
      if (typeof c.assistantName === 'string') S.assistantName = c.assistantName.trim();
      const all = c.copy && typeof c.copy === 'object' ? c.copy : {};
      const loc = pickLocale(all, opts.locale);
      const over = (m) => (m && typeof m === 'object' ? m : {});
      const merged = { ...COPY, ...over(all.en), ...(loc ? over(all[loc]) : {}) };
      copy = {};
      for (const k of Object.keys(merged)) copy[k] = typeof merged[k] === 'string' ? merged[k] : COPY[k] || '';
      const b = c.branding || {};
      powered.hidden = !!b.hidePoweredBy;
      if (typeof b.privacyPolicyUrl === 'string' && /^https?:\/\//i.test(b.privacyPolicyUrl)) {
        privacy.href = b.privacyPolicyUrl;
        privacy.hidden = false;
      }
      foot.hidden = powered.hidden && privacy.hidden;
      if (c.proactiveGreetingEnabled === false) S.proactive = false;
      const logo = typeof c.assistantLogoUrl === 'string' ? c.assistantLogoUrl : '';
      const src = /^https?:\/\//i.test(logo) ? logo : logo.startsWith('/') && !logo.startsWith('//') ? opts.origin + logo : '';
      if (src) {
        const img = h('img', { class: 'logo', alt: '', src, 'data-testid': 'steward-logo' });
        img.addEventListener('error', () => img.remove());
        logoSlot.replaceWith(img);
      }
      applyCopy();
    }

    // ---- the API ----
    async function request(method, path, body, o = {}) {
      const headers = {};
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (S.session && !o.anonymous) headers['x-service-public-session'] = S.session;
      if (o.sse) headers.accept = 'text/event-stream';
      let res;
      try {
        res = await fetch(apiBase + path, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: o.signal,
          cache: o.cache || 'no-store',
        });
      } catch (e) {
        if (e && e.name === 'AbortError') throw e;
        throw new HttpError(0, { message: 'network error' });
      }
      if (res.ok) return res;
      let err = {};
      try {
        err = (await res.json()).error || {};
      } catch {
        /* not the envelope */
      }
      // the 12 h session token ran out (or the server forgot it): resume once and try again
      if (res.status === 404 && err.message === 'Not found' && !o.anonymous && !o.renewed && S.resume) {
        await renew();
        return request(method, path, body, { ...o, renewed: true });
      }
      const ra = res.headers.get('retry-after');
      throw new HttpError(res.status, err, ra);
    }

    const renew = () => (S.renewing ||= openSession().finally(() => (S.renewing = null)));

    async function openSession() {
      const channel = page ? 'anonymous_link' : 'website_embed';
      const post = (resumeToken) =>
        request('POST', chatPath + '/sessions', resumeToken ? { channel, resumeToken } : { channel }, { anonymous: true });
      let res;
      S.resumed = !!S.resume;
      try {
        res = await post(S.resume);
      } catch (e) {
        S.resumed = false;
        if (!S.resume || (e.status !== 400 && e.status !== 404)) throw e;
        // the resume was refused: a fresh visitor (the old conversation belonged to the old one)
        S.resume = null;
        S.cid = null;
        writeStore();
        res = await post(null);
      }
      const s = await res.json();
      S.session = s.publicSessionToken;
      S.resume = s.resumeToken || S.resume;
      S.workspaceName = s.workspaceName || '';
      S.bootstrapActive = !!s.assistantBootstrapActive;
      writeStore();
      applyCopy();
      return s;
    }

    async function loadConfig() {
      try {
        const r = await request('GET', chatPath + '/embed-config', undefined, { anonymous: true, cache: 'default' });
        applyConfig(await r.json());
      } catch {
        /* the built-in defaults */
      }
    }

    // ---- start-up ----
    function init() {
      if (!S.initP) S.initP = start();
      return S.initP;
    }

    async function start() {
      setState('loading');
      const config = loadConfig();
      try {
        await openSession();
        await config;
        if (S.cid) {
          try {
            await loadHistory();
          } catch (e) {
            if (e.status !== 404 && e.status !== 400 && e.status !== 403) throw e;
            S.cid = null;
            writeStore();
          }
        }
        if (!S.cid && S.resumed) await latestConversation();
        if (!S.cid && S.bootstrapActive) await loadGreeting();
        setState('ready');
        if (S.cid) watch();
      } catch (e) {
        await config;
        S.initP = null;
        if (e.status === 403 || e.status === 404 || (e.status === 0 && (await refused()))) setState('unavailable');
        else setState('failed', e);
      }
    }

    /** A cross-origin refusal carries no CORS headers, so it looks like a network error: when the
     * server answers a no-cors request, it is there and said no (the origin is not admitted). */
    async function refused() {
      if (page) return false;
      try {
        await fetch(apiBase + chatPath + '/embed-config', { mode: 'no-cors', cache: 'no-store' });
        return true;
      } catch {
        return false;
      }
    }

    /** A visitor who resumed without a stored conversation continues their newest one. */
    async function latestConversation() {
      try {
        const r = await request('GET', chatPath);
        const list = (await r.json()).conversations || [];
        if (list[0] && list[0].id && list[0].messageCount) {
          S.cid = list[0].id;
          writeStore();
          await loadHistory();
        }
      } catch {
        S.cid = null;
      }
    }

    function setState(state, err) {
      S.state = state;
      panel.setAttribute('aria-busy', state === 'loading' ? 'true' : 'false');
      if (state === 'unavailable') {
        stopWatch();
        log.replaceChildren(h('p', { class: 'state', 'data-testid': 'steward-unavailable' }, copy.unavailable));
        form.hidden = true;
        notice.hidden = true;
      } else if (state === 'failed' && !S.turns.size) {
        // a message waiting for the start-up shows its own error and retry
        log.append(errorRow(err, () => init()));
      }
    }

    async function loadHistory() {
      const cid = S.cid;
      const path = chatPath + '/history/' + encodeURIComponent(cid);
      let d = await (await request('GET', path)).json();
      const msgs = Array.isArray(d.messages) ? d.messages.slice() : [];
      for (let pages = 1; d.hasMore && msgs.length && pages < 10; pages++) {
        const after = msgs[msgs.length - 1].cursor;
        d = await (await request('GET', path + '?cursor=' + encodeURIComponent(after))).json();
        if (!Array.isArray(d.messages) || !d.messages.length) break;
        msgs.push(...d.messages);
      }
      if (cid !== S.cid) return;
      log.replaceChildren();
      S.known.clear();
      // an agent's message before any visitor's is the greeting (it takes no feedback)
      msgs.forEach((m, i) => addMessage(m, { greeting: i === 0 && m.source === 'agent' }));
      S.cursor = d.tailCursor != null ? d.tailCursor : msgs.length ? msgs[msgs.length - 1].cursor : null;
      const last = msgs[msgs.length - 1];
      if (last && last.source === 'agent' && Array.isArray(last.suggestions)) chips(last.suggestions, last.id);
      handoff(d.ownership && d.ownership.state === 'human_owned' && !(last && last.source === 'human_agent'));
      scrollEnd(true);
    }

    async function loadGreeting() {
      try {
        const body = { startConversation: true };
        decorate(body);
        const r = await request('POST', chatPath, body);
        const g = await r.json();
        if (S.cid || !g.answer) return;
        S.bootstrap = g.bootstrapGreetingId || null;
        S.greetingText = g.answer;
        const el = addMessage({ role: 'assistant', source: 'agent', text: g.answer }, { greeting: true });
        el.dataset.testid = 'steward-greeting';
        if (Array.isArray(g.suggestions)) chips(g.suggestions, null);
      } catch {
        /* no greeting: the chat still works */
      }
    }

    function decorate(body) {
      if (opts.locale) body.userExpectedLocale = opts.locale;
      if (!page) {
        body.pageContext = {
          pageUrl: location.href,
          pageTitle: document.title,
          pageLocale: document.documentElement.lang || null,
          browserLocale: navigator.language || null,
          referrer: document.referrer || null,
        };
      }
      return body;
    }

    // ---- messages ----
    function nearBottom() {
      return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
    }
    function scrollEnd(force) {
      if (force || nearBottom()) log.scrollTop = log.scrollHeight;
    }

    /** One message of the conversation: a visitor's, the agent's or an operator's. */
    function addMessage(m, o = {}) {
      const src = m.source || (m.role === 'user' ? 'visitor' : 'agent');
      const cls = src === 'visitor' ? 'me' : src === 'human_agent' ? 'op' : 'agent';
      const el = h('div', { class: 'msg ' + cls, 'data-testid': 'steward-message', 'data-source': src });
      if (src === 'human_agent') {
        const name = typeof m.operatorDisplayName === 'string' && m.operatorDisplayName.trim();
        el.append(h('span', { class: 'who', 'data-testid': 'steward-operator' }, name ? fill(copy.team, 'name', name) : fill(copy.team, 'name', '').replace(/^\W+|\W+$/g, '')));
      }
      const bubble = h('div', { class: 'bubble' }, m.text || '');
      el.append(bubble);
      el.bubble = bubble;
      if (m.id) {
        el.dataset.messageId = m.id;
        S.known.add(m.id);
      }
      if (src === 'agent' && !o.greeting) {
        el.classList.add('answer');
        answerExtras(el, m.citations, m.id);
      }
      if (o.greeting) el.greeting = true;
      (o.before ? log.insertBefore(el, o.before) : log.append(el));
      if (src === 'human_agent') handoff(false);
      return el;
    }

    function answerExtras(el, citations, id) {
      const seen = new Set();
      const titles = [];
      for (const c of Array.isArray(citations) ? citations : []) {
        const t = c && typeof c.title === 'string' ? c.title.trim() : '';
        const key = (c && c.documentId) || t;
        // a crawled page links to its address (web addresses only)
        const url = c && typeof c.url === 'string' && /^https?:\/\//i.test(c.url) ? c.url : null;
        if (t && !seen.has(key)) {
          seen.add(key);
          titles.push({ t, url });
        }
      }
      if (titles.length) {
        const item = ({ t, url }) =>
          h('li', { 'data-testid': 'steward-citation' }, url ? h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, t) : t);
        el.append(
          h(
            'div',
            { class: 'sources', 'data-testid': 'steward-sources' },
            h('span', {}, copy.sources),
            h('ul', {}, titles.map(item)),
          ),
        );
      }
      if (id) el.append(feedback(id));
    }

    function feedback(mid) {
      const path = 'answer-feedback/public/chat/' + encodeURIComponent(opts.token) + '/messages/' + encodeURIComponent(mid);
      const up = h('button', { type: 'button', 'aria-pressed': 'false', 'aria-label': copy.feedbackUp, title: copy.feedbackUp, 'data-testid': 'steward-feedback-up' }, icon('up'));
      const down = h('button', { type: 'button', 'aria-pressed': 'false', 'aria-label': copy.feedbackDown, title: copy.feedbackDown, 'data-testid': 'steward-feedback-down' }, icon('down'));
      const thanks = h('span', { role: 'status', 'data-testid': 'steward-feedback-thanks' });
      const wrap = h('div', { class: 'fb' }, up, down, thanks);
      let rating = null;
      let commentForm = null;
      const show = () => {
        up.setAttribute('aria-pressed', String(rating === 'up'));
        down.setAttribute('aria-pressed', String(rating === 'down'));
      };
      const put = (body) => request('PUT', path, body);
      const rate = async (r) => {
        const prev = rating;
        if (commentForm) {
          commentForm.remove();
          commentForm = null;
        }
        rating = rating === r ? null : r;
        show();
        thanks.textContent = '';
        try {
          if (!rating) await request('DELETE', path);
          else {
            await put({ rating });
            thanks.textContent = copy.feedbackThanks;
            if (rating === 'down') askComment();
          }
        } catch {
          rating = prev;
          show();
          thanks.textContent = copy.error;
        }
      };
      const askComment = () => {
        const id = 'steward-fb-' + mid;
        const ta = h('textarea', { id, rows: '1', maxlength: '1000', 'data-testid': 'steward-feedback-comment' });
        commentForm = h(
          'form',
          {},
          h('label', { class: 'sr', for: id }, copy.feedbackComment),
          ta,
          h('button', { type: 'submit', 'data-testid': 'steward-feedback-send' }, copy.feedbackSend),
        );
        ta.placeholder = copy.feedbackComment;
        commentForm.addEventListener('submit', async (e) => {
          e.preventDefault();
          const comment = ta.value.trim();
          const f = commentForm;
          if (!comment) return;
          try {
            await put({ rating: 'down', comment });
            f.remove();
            if (commentForm === f) commentForm = null;
            thanks.textContent = copy.feedbackThanks;
          } catch {
            thanks.textContent = copy.error;
          }
        });
        wrap.append(commentForm);
        ta.focus();
      };
      up.addEventListener('click', () => rate('up'));
      down.addEventListener('click', () => rate('down'));
      return wrap;
    }

    function clearChips() {
      log.querySelectorAll('.chips').forEach((c) => c.remove());
    }

    /** Suggestion chips under the latest answer: a click sends the chip's text as a message. */
    function chips(list, sourceId) {
      clearChips();
      const row = h('div', { class: 'chips', 'data-testid': 'steward-chips' });
      for (const s of list) {
        if (!s || typeof s.text !== 'string' || !s.text.trim()) continue;
        const meta = {};
        if (s.action && s.action.kind === 'start_intent') {
          meta.method = 'intent_click';
          meta.intent = s.action.intent;
        } else meta.method = 'suggestion_click';
        // an answer's chip names the answer; a greeting's authored chip names itself
        const source = sourceId || s.id || S.bootstrap;
        if (source) meta.suggestionSourceMessageId = source;
        row.append(h('button', { type: 'button', class: 'chip', 'data-testid': 'steward-chip', onclick: () => send(s.text, meta) }, s.text));
      }
      if (row.childElementCount) log.append(row);
    }

    function handoff(on) {
      notice.textContent = on ? copy.handoff : '';
      notice.hidden = !on || S.state === 'unavailable';
    }

    // where a routine stands, when no person has the conversation: waiting for a review, or
    // the fields it still needs
    function routineNotice(r) {
      if (!r || notice.textContent) return;
      let text = '';
      if (r.status === 'waiting_for_approval') text = copy.approvalWait;
      else if (r.status === 'waiting_for_input' && Array.isArray(r.pendingInput) && r.pendingInput.length) {
        const fields = r.pendingInput.map((p) => String(p.description || p.key).replace(/_/g, ' ')).join(', ');
        text = fill(copy.needed, 'fields', fields);
      }
      notice.textContent = text;
      notice.hidden = !text || S.state === 'unavailable';
    }

    function errorRow(e, retry) {
      let text = copy.error;
      if (e && e.status === 429) {
        const secs = parseInt(e.retryAfter, 10) || parseInt(e.details && (e.details.retryAfterSeconds || e.details.retryAfter), 10) || 10;
        text = fill(copy.tooMany, 's', secs);
      } else if (e && e.status === 403 || e && e.status === 404) {
        text = copy.unavailable;
        retry = null;
      }
      const row = h('div', { class: 'err', role: 'alert', 'data-testid': 'steward-error' }, h('span', {}, text));
      if (retry) {
        row.append(
          h('button', { type: 'button', 'data-testid': 'steward-retry', onclick: () => { row.remove(); retry(); } }, copy.retry),
        );
      }
      return row;
    }

    // ---- sending ----
    function submit() {
      const text = input.value.trim();
      if (!text) return;
      input.value = '';
      grow();
      send(text, { method: 'typed' });
    }

    function send(text, meta) {
      if (S.state === 'unavailable') return;
      clearChips();
      hideTeaser();
      const mine = addMessage({ role: 'user', source: 'visitor', text });
      scrollEnd(true);
      turn(text, meta, mine, performance.now());
    }

    async function turn(text, meta, mine, t0) {
      const t = { el: null, text: null, ended: false, t0 };
      S.turns.add(t);
      try {
        await init();
        if (S.state !== 'ready') throw new HttpError(S.state === 'unavailable' ? 404 : 0, {});
        pending(t);
        const body = { message: text, stream: true, inputMetadata: meta };
        if (S.cid) body.conversationId = S.cid;
        else if (S.bootstrap) body.bootstrapGreetingId = S.bootstrap;
        decorate(body);
        const res = await request('POST', chatPath, body, { sse: true });
        if (!(res.headers.get('content-type') || '').includes('event-stream')) {
          done(t, await res.json());
        } else {
          for await (const ev of sse(res)) {
            let d;
            try {
              d = JSON.parse(ev.data);
            } catch {
              continue;
            }
            if (ev.event === 'conversation') conversation(d.conversationId);
            else if (ev.event === 'chunk') chunk(t, d.text);
            else if (ev.event === 'done') done(t, d);
            else if (ev.event === 'cancelled') drop(t);
            else if (ev.event === 'error') throw new HttpError(503, d.error || {});
            if (t.ended) break;
          }
          if (!t.ended) throw new HttpError(0, { message: 'the stream ended early' });
        }
      } catch (e) {
        if (e && (e.code === 'chat_turn_superseded' || e.status === 409)) drop(t);
        else {
          drop(t);
          mine.classList.add('failed');
          const retry = e && e.status !== 400 ? () => { mine.classList.remove('failed'); turn(text, meta, mine, performance.now()); } : null;
          mine.after(errorRow(e, retry));
          scrollEnd(true);
        }
      } finally {
        S.turns.delete(t);
        if (!S.turns.size) flushDeferred();
      }
    }

    function pending(t) {
      if (t.el) return;
      t.el = addMessage({ role: 'assistant', source: 'agent', text: '' }, { greeting: true });
      t.el.greeting = false;
      t.el.classList.add('pending');
      // screen readers hear the finished answer once (it replaces this bubble), not each chunk
      t.el.setAttribute('aria-hidden', 'true');
      t.el.bubble.append(h('span', { class: 'dots', 'aria-hidden': 'true' }, h('i'), h('i'), h('i')));
      scrollEnd(true);
    }

    function chunk(t, text) {
      if (typeof text !== 'string' || !text) return;
      pending(t);
      const bottom = nearBottom();
      if (!t.text) {
        t.text = document.createTextNode('');
        t.el.bubble.replaceChildren(t.text);
        t.el.dataset.firstChunkMs = (performance.now() - t.t0).toFixed(1);
      }
      t.text.data += text;
      if (bottom) scrollEnd(true);
    }

    function done(t, reply) {
      t.ended = true;
      if (reply.conversationId) conversation(reply.conversationId);
      const own = reply.ownership || {};
      if (own.suppressed || !reply.answer) {
        if (t.el) t.el.remove();
        if (reply.messageId) S.known.add(reply.messageId);
      } else {
        if (reply.messageId && S.known.has(reply.messageId) && log.querySelector('[data-message-id="' + cssEscape(reply.messageId) + '"]')) {
          if (t.el) t.el.remove();
        } else {
          const first = t.el && t.el.dataset.firstChunkMs;
          const el = addMessage({ id: reply.messageId, role: 'assistant', source: 'agent', text: reply.answer, citations: reply.citations }, { before: t.el || undefined });
          if (first) el.dataset.firstChunkMs = first;
          if (t.el) t.el.remove();
          if (Array.isArray(reply.suggestions) && reply.suggestions.length) chips(reply.suggestions, reply.messageId);
          if (!S.open) badge(S.unread + 1);
        }
      }
      handoff(own.state === 'human_owned');
      routineNotice(reply.routine);
      scrollEnd(true);
    }

    function drop(t) {
      t.ended = true;
      if (t.el) t.el.remove();
      t.el = null;
    }

    function conversation(cid) {
      if (!cid || cid === S.cid) return;
      S.cid = cid;
      S.cursor = null;
      S.bootstrap = null;
      writeStore();
      restartWatch();
    }

    // ---- live: the conversation's events, the tail, the unread badge ----
    function stopWatch() {
      if (S.watching) S.watching.abort();
      S.watching = null;
    }
    function restartWatch() {
      stopWatch();
      watch();
    }

    async function watch() {
      if (S.watching || !S.cid || S.state === 'unavailable') return;
      const ctrl = new AbortController();
      S.watching = ctrl;
      const cid = S.cid;
      let delay = 1000;
      while (S.watching === ctrl && S.cid === cid) {
        try {
          const res = await request('GET', chatPath + '/events/' + encodeURIComponent(cid), undefined, { sse: true, signal: ctrl.signal });
          for await (const ev of sse(res)) {
            if (ev.event === 'ready') {
              delay = 1000;
              pull();
            } else if (ev.event === 'message.created') pull();
          }
        } catch (e) {
          if (ctrl.signal.aborted) return;
          if (e && (e.status === 403 || e.status === 404 || e.status === 400)) {
            // the conversation or the session is gone for good; a renewed session was tried already
            if (S.watching === ctrl) S.watching = null;
            return;
          }
        }
        if (ctrl.signal.aborted) return;
        await wait(delay + Math.random() * 500);
        delay = Math.min(delay * 2, 60000);
      }
    }

    let pulling = null;
    let again = false;
    function pull() {
      if (pulling) {
        again = true;
        return pulling;
      }
      pulling = (async () => {
        do {
          again = false;
          try {
            await tail();
          } catch {
            /* the next event or reconnect pulls again */
          }
        } while (again);
      })().finally(() => (pulling = null));
      return pulling;
    }

    async function tail() {
      const cid = S.cid;
      if (!cid) return;
      const q = S.cursor != null ? '?cursor=' + encodeURIComponent(S.cursor) : '';
      const r = await request('GET', chatPath + '/tail/' + encodeURIComponent(cid) + q);
      const d = await r.json();
      if (cid !== S.cid) return;
      let fresh = 0;
      for (const m of Array.isArray(d.messages) ? d.messages : []) if (ingest(m)) fresh++;
      if (d.cursor != null) S.cursor = d.cursor;
      if (fresh) {
        scrollEnd(false);
        if (!S.open) badge(S.unread + fresh);
      }
    }

    /** A message from the tail: new ones are shown (true when they are not the visitor's own). */
    function ingest(m) {
      if (!m || !m.id || S.known.has(m.id)) return false;
      const src = m.source || (m.role === 'user' ? 'visitor' : 'agent');
      // this tab's own message (or the greeting, saved with the first message): adopt its id
      for (const el of log.querySelectorAll('.msg:not([data-message-id])')) {
        if (el.dataset.source === src && !el.classList.contains('pending') && el.bubble && el.bubble.textContent === m.text) {
          el.dataset.messageId = m.id;
          S.known.add(m.id);
          return false;
        }
      }
      // an answer being streamed here arrives with its own id; wait until the turn is over
      if (src === 'agent' && S.turns.size) {
        S.deferred.push(m);
        return false;
      }
      addMessage(m);
      if (src === 'agent' && Array.isArray(m.suggestions) && m.suggestions.length) chips(m.suggestions, m.id);
      return src !== 'visitor';
    }

    function flushDeferred() {
      const list = S.deferred;
      S.deferred = [];
      let fresh = 0;
      for (const m of list) if (!S.known.has(m.id)) {
        addMessage(m);
        fresh++;
      }
      if (fresh) {
        scrollEnd(false);
        if (!S.open) badge(S.unread + fresh);
      }
    }

    /** The unread count on the launcher (cleared by opening). */
    function badge(n) {
      if (n !== undefined) S.unread = n;
      if (!launcher) return;
      let b = launcher.querySelector('.badge');
      launcher.setAttribute('aria-label', (ctx.label ? ctx.label.textContent : '') || copy.open);
      if (!S.unread || page) {
        if (b) b.remove();
        return;
      }
      if (!b) {
        b = h('span', { class: 'badge', role: 'img', 'data-testid': 'steward-badge' });
        launcher.append(b);
      }
      const n1 = S.unread;
      const label = n1 === 1 && copy.newMessages === COPY.newMessages ? '1 unread message' : fill(copy.newMessages, 'n', n1);
      b.textContent = n1 > 9 ? '9+' : String(n1);
      b.setAttribute('aria-label', label);
      launcher.setAttribute('aria-label', ((ctx.label ? ctx.label.textContent : '') || copy.open) + ', ' + label);
    }

    // ---- the proactive greeting's teaser ----
    let teaser = null;
    function hideTeaser() {
      if (teaser) teaser.remove();
      teaser = null;
    }
    function showTeaser(text) {
      if (page || S.open || teaser || S.teaserShown) return;
      S.teaserShown = true;
      const say = h('button', { type: 'button', class: 'say', 'data-testid': 'steward-teaser', onclick: () => open() }, text.length > 160 ? text.slice(0, 157) + '…' : text);
      const x = h('button', { type: 'button', class: 'x', 'aria-label': copy.dismiss, onclick: () => { hideTeaser(); launcher && launcher.focus(); } }, icon('x'));
      teaser = h('div', { class: 'teaser', 'data-testid': 'steward-teaser-box' }, say, x);
      root.append(teaser);
    }

    // ---- open and close ----
    function open() {
      S.open = true;
      panel.hidden = false;
      root.classList.add('open');
      if (launcher) launcher.setAttribute('aria-expanded', 'true');
      hideTeaser();
      badge(0);
      init();
      scrollEnd(true);
      input.focus();
    }

    function close(focusLauncher) {
      if (page) return;
      S.open = false;
      panel.hidden = true;
      root.classList.remove('open');
      if (launcher) {
        launcher.setAttribute('aria-expanded', 'false');
        if (focusLauncher) launcher.focus();
      }
    }

    // another tab started a conversation (same visitor): follow it
    window.addEventListener('storage', (e) => {
      if (e.key !== storeKey || !e.newValue) return;
      let v = {};
      try {
        v = JSON.parse(e.newValue) || {};
      } catch {
        return;
      }
      if (typeof v.resumeToken === 'string') S.resume = v.resumeToken;
      if (typeof v.conversationId === 'string' && v.conversationId !== S.cid && S.state === 'ready' && !S.turns.size) {
        S.cid = v.conversationId;
        S.bootstrap = null;
        loadHistory().then(restartWatch, () => {});
      }
    });

    async function greet() {
      await init();
      if (S.state === 'ready' && S.greetingText && S.proactive) showTeaser(S.greetingText);
    }

    if (page) init().then(() => input.focus());
    return { open, close, toggle: () => (S.open ? close(false) : open()), greet };
  }

  const cssEscape = (s) => (window.CSS && window.CSS.escape ? window.CSS.escape(s) : String(s).replace(/["\\]/g, '\\$&'));

  /** The anonymous link's page: /chat/<token> on Steward's own origin. */
  function mountPage() {
    const m = location.pathname.match(/\/chat\/([^/]+)\/?$/);
    if (!m) return;
    const host = document.createElement('steward-chat');
    const shadow = host.attachShadow({ mode: 'open' });
    const root = document.createElement('div');
    root.className = 'root';
    shadow.append(root);
    document.body.append(host);
    const lang = document.documentElement.getAttribute('data-locale');
    const opts = { mode: 'page', token: decodeURIComponent(m[1]), origin: location.origin, locale: lang || null };
    createChat({ opts, host, shadow, root });
  }

  window.__stewardWidget = Object.freeze({ mount: (ctx) => createChat(ctx) });

  const me = document.currentScript;
  if (me && me.dataset.mode === 'page') {
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', mountPage, { once: true });
    else mountPage();
  }
})();
