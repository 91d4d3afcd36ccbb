// History-API routing: the server serves the shell for `/` and every `/app/…` path; this module
// matches the location against the page registry and tells subscribers when it changes.

import { useEffect, useState } from "../vendor/hooks.mjs";

const listeners = new Set();

function notify() { for (const l of listeners) l(location.pathname + location.search + location.hash); }

/** Goes to `to` (a path under this origin) without reloading; `replace` keeps the history length. */
export function navigate(to, { replace = false } = {}) {
  if (to === location.pathname + location.search + location.hash) return;
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  window.scrollTo(0, 0);
  notify();
}

/** Updates the query string (e.g. filters, paging) without a new history entry. */
export function setQuery(params) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "" || v === false) q.delete(k);
    else q.set(k, String(v));
  }
  const s = q.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : "") + location.hash);
  notify();
}

export function query() { return Object.fromEntries(new URLSearchParams(location.search)); }

window.addEventListener("popstate", notify);

// Same-origin links to the app navigate in place (a modified click still opens a new tab).
document.addEventListener("click", (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest && e.target.closest("a[href]");
  if (!a || a.target || a.hasAttribute("download") || a.dataset.reload !== undefined) return;
  const u = new URL(a.href, location.href);
  if (u.origin !== location.origin || !(u.pathname === "/" || u.pathname.startsWith("/app"))) return;
  e.preventDefault();
  navigate(u.pathname + u.search + u.hash);
});

/** Re-renders on every location change; returns the current path+query. */
export function useLocation() {
  const [loc, setLoc] = useState(location.pathname + location.search + location.hash);
  useEffect(() => {
    listeners.add(setLoc);
    return () => listeners.delete(setLoc);
  }, []);
  return loc;
}

/** Compiles "/app/documents/:id" into a matcher returning the params or null. */
export function compile(pattern) {
  const names = [];
  const re = new RegExp(
    "^" + pattern.replace(/\/+$/, "").replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/:(\w+)/g, (_, n) => { names.push(n); return "([^/]+)"; }) + "/?$",
  );
  return (path) => {
    const m = re.exec(path);
    if (!m) return null;
    const params = {};
    names.forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]); });
    return params;
  };
}

/** The first registry entry whose pattern matches `path`, with its params. */
export function match(pages, path) {
  for (const p of pages) {
    p._match = p._match || compile(p.path);
    const params = p._match(path);
    if (params) return { page: p, params };
  }
  return null;
}
