// Sign in, first-run registration (the first person becomes the owner), and accepting an
// invitation (/app/join#token=stw_inv_…). The owner registration is offered only while the server
// says it is open (GET /auth/registration → {open}); afterwards people join by invitation.

import { useEffect, useState } from "../../vendor/hooks.mjs";
import { get, post } from "../api.js";
import { HOME } from "../registry.js";
import { navigate } from "../router.js";
import { loadSession } from "../session.js";
import { Button, FormError, Input, html, useForm } from "../ui.js";

function nextPath(query) {
  const n = query.next || "";
  return n.startsWith("/app") ? n : HOME;
}

function tokenFromUrl(query) {
  const h = new URLSearchParams(location.hash.slice(1));
  return h.get("token") || query.token || "";
}

export default function SignIn({ query, page }) {
  const joining = page.path === "/app/join";
  const [mode, setMode] = useState(joining ? "join" : query.setup ? "register" : "signin");
  const [checking, setChecking] = useState(true);
  const [notice, setNotice] = useState(null);
  // Whether the first-run registration is open: null while unknown (not asked yet, or the check
  // failed: then the link is offered and the server's `invitation_required` answer explains it).
  const [open, setOpen] = useState(null);
  const [openChecked, setOpenChecked] = useState(joining);

  useEffect(() => {
    if (joining) return undefined;
    let live = true;
    get("/auth/registration", null, { noRedirect: true }).then(
      (r) => {
        if (!live) return;
        const isOpen = !!(r && r.open);
        setOpen(isOpen);
        setOpenChecked(true);
        // `?setup=1` on a server that already has its owner: back to sign in (its note says people join by invitation).
        if (!isOpen) setMode((m) => (m === "register" ? "signin" : m));
      },
      () => { if (live) setOpenChecked(true); },
    );
    return () => { live = false; };
  }, []);

  useEffect(() => {
    // Already signed in (this browser signed in before): go on. Otherwise skip the check, so a
    // first visit makes no failing request.
    let known = false;
    try { known = localStorage.getItem("steward.signedIn") === "1"; } catch { /* storage off */ }
    if (!known || joining) { setChecking(false); return; }
    get("/auth/me", null, { noRedirect: true }).then(
      () => { if (!joining) navigate(nextPath(query), { replace: true }); else setChecking(false); },
      () => { try { localStorage.removeItem("steward.signedIn"); } catch { /* storage off */ } setChecking(false); },
    );
  }, []);

  const done = async () => {
    await loadSession();
    navigate(nextPath(query), { replace: true });
  };

  if (checking) return html`<main class="auth-page"><p class="muted" role="status">Loading…</p></main>`;

  return html`<main class="auth-page" id="main">
    <div class="auth-card">
      <div class="auth-brand"><img src=${document.querySelector("link[rel=icon]").href} alt="" width="36" height="36" /><span>Steward</span></div>
      ${notice && html`<div class="alert alert-info" role="status" data-testid="auth-notice">${notice}</div>`}
      ${mode === "signin" && html`<${SignInForm} onDone=${done} registration=${openChecked ? (open === false ? "closed" : "open") : "unknown"}
        onSetup=${() => { setNotice(null); setMode("register"); }} />`}
      ${mode === "register" && html`<${RegisterForm} onDone=${done} first onBack=${() => setMode("signin")}
        onClosed=${(msg) => { setNotice(msg); setOpen(false); setMode("signin"); }} />`}
      ${mode === "join" && html`<${RegisterForm} onDone=${done} token=${tokenFromUrl(query)} onBack=${() => navigate("/")} />`}
    </div>
  </main>`;
}

/** `registration`: "open" offers the owner account, "closed" says people join by invitation, "unknown" (still asking) shows neither. */
function SignInForm({ onDone, onSetup, registration }) {
  const f = useForm({ email: "", password: "" });
  const submit = f.submit(async (v) => {
    await post("/auth/login", { email: v.email, password: v.password }, { noRedirect: true });
    await onDone();
  });
  return html`<form onSubmit=${submit} novalidate data-testid="signin-form">
    <h1 id="page-title" tabindex="-1">Sign in</h1>
    <p class="muted">Sign in to manage your agents and knowledge.</p>
    <${FormError} error=${f.error} fields=${["email", "password"]} />
    <${Input} form=${f} name="email" label="Email" type="email" autocomplete="username" required testid="signin-email" />
    <${Input} form=${f} name="password" label="Password" type="password" autocomplete="current-password" required testid="signin-password" />
    <${Button} type="submit" variant="primary" busy=${f.busy} testid="signin-submit" className="btn-block">Sign in</${Button}>
    ${registration === "open" && html`<p class="auth-alt">Setting up a new server?${" "}<button type="button" class="link" onClick=${onSetup} data-testid="show-register">Create the owner account</button></p>`}
    ${registration === "closed" && html`<p class="auth-alt" data-testid="invitation-only-note">New people join by invitation: ask an owner or admin of your organization for an invitation link.</p>`}
  </form>`;
}

function RegisterForm({ onDone, first, token, onBack, onClosed }) {
  const f = useForm({ email: "", password: "", name: "", organizationName: "", invitationToken: token || "" });
  const submit = f.submit(async (v) => {
    const body = { email: v.email, password: v.password };
    if (v.name.trim()) body.name = v.name.trim();
    if (first && v.organizationName.trim()) body.organizationName = v.organizationName.trim();
    if (!first) body.invitationToken = v.invitationToken.trim();
    try {
      await post("/auth/register", body, { noRedirect: true });
    } catch (e) {
      if (first && e.code === "invitation_required") {
        onClosed("This server already has an organization: sign in, or ask an owner or admin for an invitation.");
        return;
      }
      if (e.code === "invitation_required") e.field = "invitationToken";
      throw e;
    }
    await onDone();
  });
  return html`<form onSubmit=${submit} novalidate data-testid="register-form">
    <h1 id="page-title" tabindex="-1">${first ? "Create the owner account" : "Accept your invitation"}</h1>
    <p class="muted">${first
      ? "The first account on this server becomes the owner of its organization. Later people join by invitation."
      : "Create your account to join the organization you were invited to."}</p>
    <${FormError} error=${f.error} fields=${["email", "password", "name", "organizationName", "invitationToken"]} />
    ${!first && html`<${Input} form=${f} name="invitationToken" label="Invitation token" required testid="register-invitation"
      hint="The stw_inv_… token from your invitation link." />`}
    <${Input} form=${f} name="name" label="Your name (optional)" autocomplete="name" testid="register-name" />
    <${Input} form=${f} name="email" label="Email" type="email" autocomplete="email" required testid="register-email" />
    <${Input} form=${f} name="password" label="Password" type="password" autocomplete="new-password" required minlength="8"
      hint="8 to 256 characters." testid="register-password" />
    ${first && html`<${Input} form=${f} name="organizationName" label="Organization name (optional)" testid="register-org" />`}
    <${Button} type="submit" variant="primary" busy=${f.busy} testid="register-submit" className="btn-block">
      ${first ? "Create account" : "Join"}</${Button}>
    <p class="auth-alt"><button type="button" class="link" onClick=${onBack}>Back to sign in</button></p>
  </form>`;
}
