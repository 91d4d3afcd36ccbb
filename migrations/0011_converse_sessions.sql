-- Converse sessions: what an MCP credential was exchanged for (a REST session token, or an
-- `Mcp-Session-Id` on /mcp). Kept in SQLite so a restart does not break a client's conversation.
-- The conversation is bound at the first ask; the agent release the session was opened on pins
-- its routine tools.

CREATE TABLE converse_sessions (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id            TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    credential_id       TEXT NOT NULL REFERENCES channel_credentials(id) ON DELETE CASCADE,
    credential_version  INTEGER NOT NULL,
    transport           TEXT NOT NULL CHECK (transport IN ('rest', 'mcp')),
    -- the published agent revision at the exchange (its routine tools are the session's)
    revision_id         TEXT,
    conversation_id     TEXT REFERENCES conversations(id) ON DELETE SET NULL,
    client_name         TEXT,
    client_version      TEXT,
    -- what the MCP transport replays to restore the session after a restart (its initialize)
    mcp_state           TEXT,
    created_at          TEXT NOT NULL,
    expires_at          TEXT NOT NULL,
    last_used_at        TEXT NOT NULL
);
CREATE INDEX converse_sessions_credential ON converse_sessions (credential_id);
CREATE INDEX converse_sessions_expiry ON converse_sessions (expires_at);
