-- Agents as authored: agents (settings as JSON), their skills and directives, the context
-- variable catalog with per-agent enablements and scoped values, and immutable revisions.
-- Directives, skills and enablements are the draft; revisions snapshot them.

CREATE TABLE agents (
    id                      TEXT PRIMARY KEY,
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                    TEXT NOT NULL,
    is_default              INTEGER NOT NULL DEFAULT 0,
    -- every authored setting except name, as camelCase JSON (defaults filled in code)
    settings                TEXT NOT NULL DEFAULT '{}',
    draft_generation        INTEGER NOT NULL DEFAULT 1,
    draft_updated_at        TEXT NOT NULL,
    published_revision_id   TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL
);
CREATE INDEX agents_ws ON agents(workspace_id, created_at);
CREATE UNIQUE INDEX agents_one_default ON agents(workspace_id) WHERE is_default = 1;

CREATE TABLE agent_logos (
    agent_id        TEXT PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
    mime_type       TEXT NOT NULL,
    filename        TEXT,
    bytes           BLOB NOT NULL,
    sha256          TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

CREATE TABLE agent_skills (
    id              TEXT PRIMARY KEY,
    agent_id        TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    workspace_id    TEXT NOT NULL,
    name            TEXT NOT NULL,
    capability      TEXT NOT NULL,
    target          TEXT,
    config          TEXT NOT NULL DEFAULT '{}',
    invocation_mode TEXT NOT NULL,
    enabled         INTEGER NOT NULL DEFAULT 1,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX agent_skills_name ON agent_skills(agent_id, name);

CREATE TABLE directives (
    id              TEXT PRIMARY KEY,
    agent_id        TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    workspace_id    TEXT NOT NULL,
    name            TEXT NOT NULL,
    -- the authored directive (condition, action, priority, binding, coverageCriteria, tags, …)
    body            TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX directives_name ON directives(agent_id, name);

CREATE TABLE context_variables (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    value_type          TEXT NOT NULL CHECK (value_type IN ('string', 'json')),
    trust_tier          TEXT NOT NULL CHECK (trust_tier IN ('unverified', 'signed')),
    sensitivity         TEXT NOT NULL CHECK (sensitivity IN ('normal', 'sensitive')),
    default_surfacing   TEXT NOT NULL CHECK (default_surfacing IN ('always', 'on_reference', 'operator_only')),
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE UNIQUE INDEX context_variables_name ON context_variables(workspace_id, name);

CREATE TABLE agent_context_variables (
    agent_id            TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    variable_id         TEXT NOT NULL REFERENCES context_variables(id) ON DELETE CASCADE,
    source              TEXT NOT NULL CHECK (source IN ('pushed', 'resolver')),
    surfacing           TEXT NOT NULL,
    enabled             INTEGER NOT NULL DEFAULT 1,
    resolver_skill_id   TEXT REFERENCES agent_skills(id) ON DELETE CASCADE,
    updated_at          TEXT NOT NULL,
    PRIMARY KEY (agent_id, variable_id)
);

CREATE TABLE context_values (
    variable_id     TEXT NOT NULL REFERENCES context_variables(id) ON DELETE CASCADE,
    scope_type      TEXT NOT NULL CHECK (scope_type IN ('session', 'customer', 'agent', 'workspace')),
    scope_id        TEXT NOT NULL,
    data            TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (variable_id, scope_type, scope_id)
);

-- Immutable snapshots. A candidate per draft generation; publishing one gives it a version.
CREATE TABLE agent_revisions (
    id                          TEXT PRIMARY KEY,
    agent_id                    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    workspace_id                TEXT NOT NULL,
    generation                  INTEGER NOT NULL,
    kind                        TEXT NOT NULL CHECK (kind IN ('candidate', 'published')),
    version_number              INTEGER,
    snapshot                    TEXT NOT NULL,
    base_published_revision_id  TEXT,
    created_at                  TEXT NOT NULL,
    published_at                TEXT
);
CREATE UNIQUE INDEX agent_revisions_generation ON agent_revisions(agent_id, generation);
CREATE UNIQUE INDEX agent_revisions_version ON agent_revisions(agent_id, version_number) WHERE version_number IS NOT NULL;

CREATE TABLE agent_publish_commands (
    agent_id            TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    idempotency_key     TEXT NOT NULL,
    revision_id         TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    PRIMARY KEY (agent_id, idempotency_key)
);
