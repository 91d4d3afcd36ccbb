-- Foundation: organization, workspaces, people, sign-in sessions, API credentials, audit, jobs.
-- Timestamps are RFC 3339 UTC text with milliseconds (they sort in time order); job scheduling
-- fields are integer milliseconds since the epoch.

CREATE TABLE organizations (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE users (
    id              TEXT PRIMARY KEY,
    email           TEXT NOT NULL UNIQUE,
    name            TEXT,
    password_hash   TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

CREATE TABLE memberships (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role            TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_at      TEXT NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user ON memberships(user_id);

CREATE TABLE workspaces (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    is_default      INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX workspaces_org ON workspaces(organization_id);

-- Dashboard sessions; the cookie carries a random token, the table its SHA-256.
CREATE TABLE sessions (
    token_hash  TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    user_agent  TEXT,
    client_addr TEXT
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE invitations (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    email           TEXT,
    role            TEXT NOT NULL CHECK (role IN ('admin', 'member')),
    token_hash      TEXT NOT NULL UNIQUE,
    invited_by      TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    accepted_at     TEXT,
    accepted_by     TEXT REFERENCES users(id) ON DELETE SET NULL,
    revoked_at      TEXT
);

-- Personal access tokens (kind 'personal', act as their user) and workspace service credentials
-- (kind 'service', bound to one workspace). Only the SHA-256 of the token is stored.
CREATE TABLE api_tokens (
    id              TEXT PRIMARY KEY,
    kind            TEXT NOT NULL CHECK (kind IN ('personal', 'service')),
    name            TEXT NOT NULL,
    token_hash      TEXT NOT NULL UNIQUE,
    token_prefix    TEXT NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id         TEXT REFERENCES users(id) ON DELETE CASCADE,
    workspace_id    TEXT REFERENCES workspaces(id) ON DELETE CASCADE,
    permissions     TEXT NOT NULL,
    created_by      TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at      TEXT NOT NULL,
    expires_at      TEXT,
    last_used_at    TEXT,
    revoked_at      TEXT,
    CHECK ((kind = 'personal' AND user_id IS NOT NULL) OR (kind = 'service' AND workspace_id IS NOT NULL))
);
CREATE INDEX api_tokens_user ON api_tokens(user_id);
CREATE INDEX api_tokens_workspace ON api_tokens(workspace_id);

-- Append-only record of who did what. Metadata never holds secrets or document content.
CREATE TABLE audit_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT NOT NULL UNIQUE,
    organization_id TEXT,
    workspace_id    TEXT,
    actor_type      TEXT NOT NULL,
    actor_id        TEXT,
    action          TEXT NOT NULL,
    target_type     TEXT,
    target_id       TEXT,
    metadata        TEXT NOT NULL DEFAULT '{}',
    request_id      TEXT,
    created_at      TEXT NOT NULL
);
CREATE INDEX audit_events_org ON audit_events(organization_id, id);
CREATE INDEX audit_events_ws ON audit_events(workspace_id, id);
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;

-- The durable job queue.
CREATE TABLE jobs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    dedupe_key      TEXT UNIQUE,
    priority        INTEGER NOT NULL DEFAULT 0,
    state           TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    run_at          INTEGER NOT NULL,
    lease_until     INTEGER,
    lease_owner     TEXT,
    last_error      TEXT,
    workspace_id    TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    finished_at     INTEGER
);
CREATE INDEX jobs_ready ON jobs(state, priority DESC, run_at, id);
CREATE INDEX jobs_lease ON jobs(state, lease_until);
