-- Outbound deliveries (webhooks and email through the outbox), their attempts, and answer feedback
-- for the operator inbox.

CREATE TABLE deliveries (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    channel             TEXT NOT NULL CHECK (channel IN ('webhook', 'email')),
    -- what is delivered: handoff.notify, contact.request, skill.webhook_call, test
    event               TEXT NOT NULL,
    -- webhook: the URL without its query; email: the recipients, comma-separated
    target              TEXT NOT NULL,
    conversation_id     TEXT,
    -- sent as Idempotency-Key; the same on every attempt
    idempotency_key     TEXT NOT NULL,
    -- pending, retry, success, failed, skipped
    status              TEXT NOT NULL DEFAULT 'pending',
    attempts            INTEGER NOT NULL DEFAULT 0,
    last_status_code    INTEGER,
    last_error          TEXT,
    job_id              INTEGER,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    delivered_at        TEXT
);
CREATE INDEX deliveries_ws ON deliveries(workspace_id, created_at DESC, id DESC);

CREATE TABLE delivery_attempts (
    delivery_id         TEXT NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
    attempt             INTEGER NOT NULL,
    at                  TEXT NOT NULL,
    -- success, retry, failed, skipped
    outcome             TEXT NOT NULL,
    status_code         INTEGER,
    duration_ms         REAL NOT NULL,
    -- never a body: the transport error, the refusal or the SMTP server's answer
    error               TEXT,
    PRIMARY KEY (delivery_id, attempt)
);

CREATE TABLE message_feedback (
    message_id          TEXT PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    workspace_id        TEXT NOT NULL,
    conversation_id     TEXT NOT NULL,
    rating              TEXT NOT NULL CHECK (rating IN ('up', 'down')),
    comment             TEXT,
    user_id             TEXT,
    resolved_at         TEXT,
    resolved_by         TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX message_feedback_open ON message_feedback(workspace_id, rating, resolved_at, updated_at);
