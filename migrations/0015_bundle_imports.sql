-- Agent bundle imports: one durable job row per import attempt
-- (queued → applying → applied | failed | compensated). The agent an attempt creates is named here
-- as soon as it exists, so a cleanup can remove it after a crash; the id stays after the agent is
-- gone (no foreign key). An idempotency key is held only by an active or applied attempt: the
-- partial unique index makes two concurrent attempts with one key impossible.
-- (0014 is left to the evals work.)

CREATE TABLE agent_bundle_imports (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    idempotency_key     TEXT,
    -- sha256 of the canonical bundle without its idempotency key (a key repeated with another
    -- bundle is refused)
    fingerprint         TEXT NOT NULL,
    state               TEXT NOT NULL CHECK (state IN ('queued', 'applying', 'applied', 'failed', 'compensated')),
    agent_id            TEXT,
    -- [{kind, element, detail}]
    unresolved          TEXT NOT NULL DEFAULT '[]',
    -- {routines, skills, contextVariables, directives, unresolved}
    counts              TEXT NOT NULL DEFAULT '{}',
    -- {code, message} of a failed or compensated attempt
    error               TEXT,
    created_by          TEXT,
    created_at          TEXT NOT NULL,
    created_at_ms       INTEGER NOT NULL,
    updated_at          TEXT NOT NULL,
    finished_at         TEXT
);
CREATE UNIQUE INDEX agent_bundle_imports_key ON agent_bundle_imports(workspace_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND state IN ('queued', 'applying', 'applied');
CREATE INDEX agent_bundle_imports_active ON agent_bundle_imports(created_at_ms)
    WHERE state IN ('queued', 'applying');
