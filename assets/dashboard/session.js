// The signed-in person: `/auth/me` (user, organization, role, workspaces, permissions), the
// selected workspace (kept in localStorage, sent as X-Workspace-Id) and permission checks.

import { useEffect, useState } from "../vendor/hooks.mjs";
import { get, post, setWorkspace } from "./api.js";

const KEY = "steward.workspace";
let me = null;
const listeners = new Set();

function emit() { for (const l of listeners) l(me); }

/** Loads `/auth/me` for the stored workspace (falling back to the default one). */
export async function loadSession() {
  let stored = null;
  try { stored = localStorage.getItem(KEY); } catch { /* storage off */ }
  setWorkspace(stored);
  try {
    me = await get("/auth/me", null, { noRedirect: true });
  } catch (e) {
    if (stored && e.status === 404) {
      // The stored workspace is gone or not ours any more: use the default one.
      setWorkspace(null);
      me = await get("/auth/me", null, { noRedirect: true });
    } else {
      throw e;
    }
  }
  setWorkspace(me.workspace && me.workspace.id);
  try { localStorage.setItem("steward.signedIn", "1"); } catch { /* storage off */ }
  emit();
  return me;
}

export function session() { return me; }

/** True when the current credential holds `permission` (a missing permission means "anyone"). */
export function can(permission) {
  if (!permission) return true;
  return !!(me && me.permissions && me.permissions.includes(permission));
}

/** Switches workspace: later requests and pages run in it. */
export async function switchWorkspace(id) {
  try { localStorage.setItem(KEY, id); } catch { /* storage off */ }
  setWorkspace(id);
  await loadSession();
}

export async function signOut() {
  try { await post("/auth/logout", undefined, { noRedirect: true }); } catch { /* already gone */ }
  me = null;
  try { localStorage.removeItem(KEY); localStorage.removeItem("steward.signedIn"); } catch { /* storage off */ }
  location.assign("/");
}

/** The session, re-rendering on every change (a workspace switch, a reload). */
export function useSession() {
  const [s, set] = useState(me);
  useEffect(() => {
    const l = (v) => set(v ? { ...v } : v);
    listeners.add(l);
    return () => listeners.delete(l);
  }, []);
  return s;
}
