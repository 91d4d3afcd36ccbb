// The page registry: one line per page. Adding a page = one module under pages/ (its default
// export is the component; it receives {params, query}) + one entry here.
//
//   path        pattern matched against location.pathname (":name" captures a segment)
//   title       the page title (document.title and the nav link)
//   section     the sidebar group; null = not in the sidebar (detail pages)
//   permission  required permission from /auth/me (hidden from nav and refused without it)
//   load        () => import("./pages/x.js"): loaded lazily the first time the page is shown
//   public      true for pages shown without a session (sign-in, invitations); no app chrome
//
// Order matters: the first matching pattern wins, and nav links keep this order.

export const sections = ["Knowledge", "Agents", "Conversations", "Settings", "Organization"];

export const pages = [
  { path: "/", title: "Sign in", public: true, load: () => import("./pages/signin.js") },
  { path: "/app/join", title: "Accept invitation", public: true, load: () => import("./pages/signin.js") },

  { path: "/app/documents", title: "Documents", section: "Knowledge", permission: "workspace.documents.read", load: () => import("./pages/documents.js") },
  { path: "/app/documents/:id", title: "Document", permission: "workspace.documents.read", load: () => import("./pages/document.js") },
  { path: "/app/sources", title: "Sources", section: "Knowledge", permission: "workspace.documents.read", load: () => import("./pages/sources.js") },
  { path: "/app/search", title: "Search playground", section: "Knowledge", permission: "workspace.retrieval.query", load: () => import("./pages/search.js") },

  { path: "/app/agents", title: "Agents", section: "Agents", permission: "workspace.agents.read", load: () => import("./pages/agents.js") },
  { path: "/app/agents/:id", title: "Agent", permission: "workspace.agents.read", load: () => import("./pages/agent.js") },
  { path: "/app/agents/:id/:tab", title: "Agent", permission: "workspace.agents.read", load: () => import("./pages/agent.js") },
  { path: "/app/chat", title: "Test chat", section: "Agents", permission: "workspace.chat", load: () => import("./pages/chat.js") },
  { path: "/app/evals", title: "Evals", section: "Agents", permission: "workspace.agents.read", load: () => import("./pages/evals.js") },
  { path: "/app/context-variables", title: "Context variables", section: "Agents", permission: "workspace.agents.read", load: () => import("./pages/context.js") },

  { path: "/app/inbox", title: "Inbox", section: "Conversations", permission: "workspace.conversation.takeover", load: () => import("./pages/inbox.js") },
  { path: "/app/inbox/:id", title: "Inbox", permission: "workspace.conversation.takeover", load: () => import("./pages/inbox.js") },
  { path: "/app/conversations", title: "Conversations", section: "Conversations", permission: "workspace.conversations.read", load: () => import("./pages/conversations.js") },
  { path: "/app/conversations/:id", title: "Conversation", permission: "workspace.conversations.read", load: () => import("./pages/conversation.js") },
  { path: "/app/quality", title: "Answer quality", section: "Conversations", permission: "workspace.conversations.read", load: () => import("./pages/quality.js") },
  { path: "/app/traces/:id", title: "Turn trace", permission: "workspace.conversations.read", load: () => import("./pages/trace.js") },

  { path: "/app/settings/ingestion", title: "Ingestion", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/ingestion.js") },
  { path: "/app/settings/knowledge", title: "Knowledge index", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/knowledge.js") },
  { path: "/app/settings/document-types", title: "Document types", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/document-types.js") },
  { path: "/app/settings/models", title: "Models & providers", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/models.js") },
  { path: "/app/settings/retrieval", title: "Retrieval defaults", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/retrieval.js") },
  { path: "/app/settings/channels", title: "Public chat & widget", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/channels.js") },
  { path: "/app/settings/notifications", title: "Notifications", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/notifications.js") },
  { path: "/app/settings/webhook-destinations", title: "Webhook destinations", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/webhook-destinations.js") },
  { path: "/app/settings/connectors", title: "Connectors", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/connectors.js") },
  { path: "/app/settings/connectors/:id", title: "Connector", permission: "workspace.settings.read", load: () => import("./pages/connectors.js") },
  { path: "/app/settings/deliveries", title: "Delivery log", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/deliveries.js") },
  { path: "/app/settings/usage", title: "Usage", section: "Settings", permission: "workspace.settings.read", load: () => import("./pages/usage.js") },

  { path: "/app/org/members", title: "Members & invitations", section: "Organization", permission: "organization.members.manage", load: () => import("./pages/members.js") },
  { path: "/app/org/workspaces", title: "Workspaces", section: "Organization", load: () => import("./pages/workspaces.js") },
  { path: "/app/org/service-credentials", title: "Service credentials", section: "Organization", permission: "organization.api_access.manage", load: () => import("./pages/service-credentials.js") },
  { path: "/app/org/audit", title: "Audit log", section: "Organization", permission: "organization.audit.read", load: () => import("./pages/audit.js") },
  { path: "/app/api", title: "API reference", section: "Organization", load: () => import("./pages/api.js") },

  { path: "/app/profile", title: "Profile & tokens", load: () => import("./pages/profile.js") },
];

/** Where /app and a signed-in visit to / go. */
export const HOME = "/app/documents";
