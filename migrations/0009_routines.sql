-- Routines (part of an agent's draft, frozen into its revisions), the approvals they wait on, and
-- the webhook destinations their results are exported to.

CREATE TABLE routines (
    id              TEXT PRIMARY KEY,
    agent_id        TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    workspace_id    TEXT NOT NULL,
    name            TEXT NOT NULL,
    -- the integer version the author gives (portable create refuses a second one with the same name)
    version         INTEGER NOT NULL DEFAULT 1,
    -- the structured definition (routines::definition::Definition as JSON)
    definition      TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX routines_name_version ON routines(agent_id, name, version);

-- A routine waiting for a person's decision (an approval gate).
CREATE TABLE decisions (
    handle          TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id        TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    routine_id      TEXT NOT NULL,
    routine_name    TEXT NOT NULL DEFAULT '',
    step_id         TEXT NOT NULL,
    reason          TEXT NOT NULL,
    -- [{id, label, description}]
    options         TEXT NOT NULL,
    content_hash    TEXT NOT NULL,
    deadline        TEXT,
    -- the option a deadline takes (beyond the spec), if the gate declares one
    timeout_option  TEXT,
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'resolved')),
    chosen_option   TEXT,
    resolved_by     TEXT,
    resolved_at     TEXT,
    created_at      TEXT NOT NULL
);
CREATE INDEX decisions_open ON decisions(workspace_id, status, created_at);

CREATE TABLE webhook_destinations (
    id                      TEXT PRIMARY KEY,
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                    TEXT NOT NULL,
    url                     TEXT NOT NULL,
    -- the signing secret, sealed with the deployment key (crypto::seal)
    secret_sealed           TEXT NOT NULL,
    last_delivery_status    TEXT,
    last_delivery_at        TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL
);
