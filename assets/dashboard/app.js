// The dashboard shell: boots the session, draws the header (workspace switcher, user menu), the
// sidebar from the page registry and the current page, loaded lazily.

import { render } from "../vendor/preact.mjs";
import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { setUnauthorizedHandler } from "./api.js";
import { HOME, pages, sections } from "./registry.js";
import { match, navigate, useLocation } from "./router.js";
import { can, loadSession, signOut, switchWorkspace, useSession } from "./session.js";
import { Empty, ErrorBox, Loading, Toaster, html, toast } from "./ui.js";

setUnauthorizedHandler(() => {
  const here = location.pathname + location.search;
  try { localStorage.removeItem("steward.signedIn"); } catch { /* storage off */ }
  if (location.pathname === "/" || location.pathname === "/app/join") return;
  location.assign("/?next=" + encodeURIComponent(here));
});

const loaded = new Map();

/** Loads a page module once; re-renders when it arrives. */
function usePageModule(page) {
  const [, force] = useState(0);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (!page || loaded.has(page)) return;
    setError(null);
    page.load().then((m) => { loaded.set(page, m.default); force((n) => n + 1); }, setError);
  }, [page]);
  return { Component: page && loaded.get(page), error };
}

function Page({ page, params, query }) {
  const { Component, error } = usePageModule(page);
  if (error) return html`<${ErrorBox} error=${error} retry=${() => location.reload()} />`;
  if (!Component) return html`<${Loading} />`;
  return html`<${Component} params=${params} query=${query} page=${page} />`;
}

function WorkspaceSwitcher({ me }) {
  const [busy, setBusy] = useState(false);
  const change = async (e) => {
    const id = e.currentTarget.value;
    setBusy(true);
    try {
      await switchWorkspace(id);
      const ws = me.workspaces.find((w) => w.id === id);
      toast(`Switched to ${ws ? ws.name : "workspace"}`, "info");
    } catch (err) { toast(err.message, "error"); } finally { setBusy(false); }
  };
  return html`<div class="ws-switch">
    <label for="workspace-switcher">Workspace</label>
    <select id="workspace-switcher" data-testid="workspace-switcher" value=${me.workspace && me.workspace.id} onChange=${change} disabled=${busy}>
      ${(me.workspaces || []).map((w) => html`<option value=${w.id}>${w.name}</option>`)}
    </select>
  </div>`;
}

function UserMenu({ me }) {
  const ref = useRef(null);
  useEffect(() => {
    const close = (e) => { if (ref.current && ref.current.open && !ref.current.contains(e.target)) ref.current.open = false; };
    const esc = (e) => { if (e.key === "Escape" && ref.current && ref.current.open) { ref.current.open = false; ref.current.querySelector("summary").focus(); } };
    document.addEventListener("click", close);
    document.addEventListener("keydown", esc);
    return () => { document.removeEventListener("click", close); document.removeEventListener("keydown", esc); };
  }, []);
  const name = (me.user && (me.user.name || me.user.email)) || "Account";
  return html`<details class="user-menu" ref=${ref}>
    <summary data-testid="user-menu">
      <span class="avatar" aria-hidden="true">${name.slice(0, 1).toUpperCase()}</span>
      <span class="user-name">${name}</span>
    </summary>
    <div class="menu">
      <p class="menu-info">${me.user && me.user.email}<br /><span class="muted">${me.role} · ${me.organization && me.organization.name}</span></p>
      <a href="/app/profile" class="menu-item" onClick=${() => { ref.current.open = false; }}>Profile & tokens</a>
      <button type="button" class="menu-item" data-testid="sign-out" onClick=${signOut}>Sign out</button>
    </div>
  </details>`;
}

function Sidebar({ path }) {
  return html`<nav class="sidebar" aria-label="Main">
    ${sections.map((s) => {
      const items = pages.filter((p) => p.section === s && can(p.permission));
      if (!items.length) return null;
      return html`<div class="nav-section">
        <h2 class="nav-title">${s}</h2>
        <ul>${items.map((p) => {
          const active = path === p.path || path.startsWith(p.path + "/");
          return html`<li><a href=${p.path} class=${"nav-link" + (active ? " active" : "")} aria-current=${active ? "page" : undefined}
            data-testid=${"nav-" + p.path.split("/").pop()}>${p.title}</a></li>`;
        })}</ul>
      </div>`;
    })}
  </nav>`;
}

function Forbidden({ page }) {
  return html`<${Empty} title="You do not have access to this page" testid="forbidden">
    ${page.title} needs the permission ${page.permission}. Ask an owner or admin of your organization.
  </${Empty}>`;
}

function Shell() {
  const loc = useLocation();
  const me = useSession();
  const [state, setState] = useState({ loading: true, error: null });
  const url = new URL(loc, location.origin);
  const path = url.pathname.replace(/\/+$/, "") || "/";
  const m = match(pages, path);
  const isPublic = m && m.page.public;
  const query = Object.fromEntries(url.searchParams);

  useEffect(() => {
    if (isPublic) { setState({ loading: false, error: null }); return; }
    if (me) { setState({ loading: false, error: null }); return; }
    loadSession().then(
      () => setState({ loading: false, error: null }),
      (e) => {
        if (e.status === 401) location.assign("/?next=" + encodeURIComponent(location.pathname + location.search));
        else setState({ loading: false, error: e });
      },
    );
  }, [isPublic]);

  useEffect(() => {
    if (path === "/app") navigate(HOME, { replace: true });
  }, [path]);

  const title = m ? m.page.title : "Not found";
  useEffect(() => {
    document.title = `${title} · Steward`;
    const h1 = document.getElementById("page-title");
    if (h1 && document.activeElement === document.body) h1.focus({ preventScroll: true });
  }, [path, title]);

  if (isPublic) {
    return html`<${Page} page=${m.page} params=${m.params} query=${query} /><${Toaster} />`;
  }
  if (state.error) return html`<main class="center-page"><${ErrorBox} error=${state.error} retry=${() => location.reload()} /></main>`;
  if (state.loading || !me) return html`<main class="center-page"><${Loading} label="Signing in…" /></main>`;

  const wsKey = me.workspace && me.workspace.id;
  return html`<div class="layout">
    <a class="skip" href="#main">Skip to content</a>
    <header class="topbar">
      <a href=${HOME} class="brand"><img src=${document.querySelector("link[rel=icon]").href} alt="" width="24" height="24" /> Steward</a>
      <span class="org muted">${me.organization && me.organization.name}</span>
      <div class="topbar-right">
        <${WorkspaceSwitcher} me=${me} />
        <${UserMenu} me=${me} />
      </div>
    </header>
    <${Sidebar} path=${path} />
    <main id="main" class="main" tabindex="-1">
      ${!m
        ? html`<${Empty} title="Page not found">There is no page at this address. <a href=${HOME}>Go to documents</a>.</${Empty}>`
        : !can(m.page.permission)
          ? html`<${Forbidden} page=${m.page} />`
          : html`<${Page} key=${wsKey + path} page=${m.page} params=${m.params} query=${query} />`}
    </main>
    <${Toaster} />
  </div>`;
}

render(html`<${Shell} />`, document.getElementById("root"));
