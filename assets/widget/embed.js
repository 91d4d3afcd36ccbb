/*
 * Steward chat: the website embed's loader. One tag on any page:
 *
 *   <script src="https://STEWARD/embed.js" data-token="we_..." async></script>
 *
 * Attributes (only data-token is required):
 *   data-token       the website embed's launch token (we_…)
 *   data-label       the launcher's text ("Chat with us")
 *   data-position    bottom-right (default) | bottom-left
 *   data-brand       the launcher's colour, 6-digit hex (#0f172a)
 *   data-brand-text  the text colour on it, 6-digit hex (#f8fafc)
 *   data-proactive   present: the greeting is due; the chat loads and fetches its greeting at
 *                    once instead of waiting for a click
 *   data-locale      the visitor's language (BCP 47: "de", "pt-BR") for the copy and the answers
 *
 * The dashboard's snippet writes them from the channel's settings. Those given here win (the
 * launcher never changes under the visitor's pointer); what is left out comes from the
 * workspace's embed-config once the chat opens (as do the copy, the panel's colours and the logo).
 *
 * Until the visitor opens the chat (or data-proactive), this file makes no network request: it
 * draws the launcher button in a shadow root and, on the first click, loads
 * {{ASSETS}}/widget/widget.js, which registers window.__stewardWidget and takes over the same
 * shadow root. It works under a strict host CSP ('nonce-…' 'strict-dynamic', no unsafe-inline):
 * no inline style, only a constructed stylesheet and CSSOM custom properties.
 */
(() => {
  'use strict';
  const me = document.currentScript || document.querySelector('script[data-token][src*="/embed.js"]');
  const token = me && me.dataset.token;
  if (!token) return;
  const d = me.dataset;
  const origin = new URL(me.src, location.href).origin;
  const hex = (v) => (/^#[0-9a-fA-F]{6}$/.test(v || '') ? v : null);
  const opts = {
    token,
    origin,
    assets: origin + '{{ASSETS}}',
    label: (d.label || '').trim() || null,
    position: d.position === 'bottom-left' || d.position === 'bottom-right' ? d.position : null,
    brand: hex(d.brand),
    brandText: hex(d.brandText),
    proactive: 'proactive' in d && d.proactive !== 'false',
    locale: (d.locale || '').trim() || null,
    nonce: me.nonce || '',
  };

  const CSS = `
:host{all:initial!important;display:block!important;position:fixed!important;inset:auto!important;
  width:0!important;height:0!important;margin:0!important;padding:0!important;border:0!important;
  z-index:2147483000!important;visibility:visible!important;opacity:1!important;transform:none!important;
  --steward-brand:#0f172a;--steward-brand-text:#f8fafc;--steward-surface:#ffffff;--steward-text:#0f172a}
.root{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
  color:var(--steward-text);-webkit-text-size-adjust:100%;text-size-adjust:100%}
.root *,.root *::before,.root *::after{box-sizing:border-box}
.launcher{position:fixed;bottom:20px;right:20px;display:inline-flex;align-items:center;gap:8px;
  min-height:48px;max-width:calc(100vw - 40px);padding:0 18px 0 14px;margin:0;border:0;border-radius:24px;
  background:var(--steward-brand);color:var(--steward-brand-text);font:inherit;font-size:15px;font-weight:600;line-height:1.2;
  cursor:pointer;box-shadow:0 6px 20px rgba(15,23,42,.25);text-align:left}
.left .launcher{left:20px;right:auto}
.launcher:hover{filter:brightness(1.12)}
.launcher:focus{outline:none}
.launcher:focus-visible{outline:3px solid var(--steward-brand);outline-offset:3px;box-shadow:0 0 0 3px #fff}
.launcher svg{flex:none;width:22px;height:22px;fill:currentColor}
.launcher .label{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.launcher[aria-busy=true]{cursor:progress;opacity:.85}
.launcher .badge{position:absolute;top:-6px;right:-6px;min-width:22px;height:22px;padding:0 6px;border-radius:11px;
  background:#b91c1c;color:#fff;font:inherit;font-size:12px;font-weight:700;line-height:18px;text-align:center;border:2px solid #fff}
.left .launcher .badge{right:auto;left:-6px}
@media (prefers-reduced-motion:no-preference){.launcher{transition:filter .15s}}
`;

  function start() {
    // the same snippet twice on a page draws one launcher
    if (document.querySelector('steward-chat[data-token="' + token.replace(/["\\]/g, '') + '"]')) return;
    const host = document.createElement('steward-chat');
    host.dataset.token = token;
    const shadow = host.attachShadow({ mode: 'open' });
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
    shadow.adoptedStyleSheets = [sheet];
    if (opts.brand) host.style.setProperty('--steward-brand', opts.brand);
    if (opts.brandText) host.style.setProperty('--steward-brand-text', opts.brandText);

    const root = document.createElement('div');
    root.className = 'root' + (opts.position === 'bottom-left' ? ' left' : '');
    const launcher = document.createElement('button');
    launcher.type = 'button';
    launcher.className = 'launcher';
    launcher.dataset.testid = 'steward-launcher';
    launcher.setAttribute('aria-expanded', 'false');
    launcher.setAttribute('aria-controls', 'steward-panel');
    launcher.setAttribute('aria-haspopup', 'dialog');
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('aria-hidden', 'true');
    svg.setAttribute('focusable', 'false');
    const path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
    path.setAttribute('d', 'M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2zm3 6.5a1.5 1.5 0 1 0 0 .01zm5 0a1.5 1.5 0 1 0 0 .01zm5 0a1.5 1.5 0 1 0 0 .01z');
    svg.append(path);
    const label = document.createElement('span');
    label.className = 'label';
    label.textContent = opts.label || 'Chat with us';
    launcher.append(svg, label);
    root.append(launcher);
    shadow.append(root);
    document.body.append(host);

    const ctx = { opts, host, shadow, root, launcher, label, app: null };
    let loading = null;
    let wantOpen = false;
    const load = () => {
      if (!loading) {
        loading = new Promise((resolve, reject) => {
          if (window.__stewardWidget) return resolve();
          const s = document.createElement('script');
          s.src = opts.assets + '/widget/widget.js';
          s.async = true;
          if (opts.nonce) s.nonce = opts.nonce;
          s.onload = resolve;
          s.onerror = reject;
          document.head.append(s);
        }).then(
          () => {
            ctx.app = window.__stewardWidget.mount(ctx);
            launcher.removeAttribute('aria-busy');
            if (wantOpen) ctx.app.open();
            else if (opts.proactive) ctx.app.greet();
          },
          () => {
            launcher.removeAttribute('aria-busy');
            loading = null; // a later click tries again
          },
        );
      }
      return loading;
    };
    launcher.addEventListener('click', () => {
      if (ctx.app) return ctx.app.toggle();
      wantOpen = true;
      launcher.setAttribute('aria-busy', 'true');
      load();
    });
    if (opts.proactive) load();
  }

  if (document.body) start();
  else document.addEventListener('DOMContentLoaded', start, { once: true });
})();
