-- Agent channel credentials: what another AI agent (over MCP) or a backend (REST) presents to
-- talk to one agent. The secret is shown once; only its SHA-256 is kept. Rotating bumps the
-- version (sessions made under an older version stop working).

CREATE TABLE channel_credentials (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id        TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    audience        TEXT NOT NULL CHECK (audience IN ('mcp', 'rest')),
    label           TEXT NOT NULL,
    -- the secret's first characters, to recognise it in a list
    prefix          TEXT NOT NULL,
    secret_hash     TEXT NOT NULL UNIQUE,
    version         INTEGER NOT NULL DEFAULT 1,
    revoked_at      TEXT,
    expires_at      TEXT,
    last_used_at    TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX channel_credentials_agent ON channel_credentials (agent_id, audience);
