-- Usage limits, plans and credits. Owned by `usage::limits`.
-- A usage profile: the limits an account is held to (NULL = unlimited). The seeded plan profiles
-- (`comet`, `satellite`, `planet`) are inserted by the server at start when missing, never
-- overwritten.
CREATE TABLE usage_profiles (
    key                         TEXT PRIMARY KEY,
    display_name                TEXT NOT NULL,
    monthly_answer_limit        INTEGER,
    stored_document_limit       INTEGER,
    stored_indexed_byte_limit   INTEGER,
    monthly_indexed_byte_limit  INTEGER,
    monthly_conversation_limit  INTEGER,
    replies_per_conversation    INTEGER NOT NULL DEFAULT 10,
    created_at                  TEXT NOT NULL,
    updated_at                  TEXT NOT NULL
);

-- An account (organization) with a profile assigned and its credit balance (in conversations,
-- never expiring). An account with no row, or a NULL profile, is unlimited.
CREATE TABLE usage_accounts (
    organization_id TEXT PRIMARY KEY REFERENCES organizations(id) ON DELETE CASCADE,
    profile_key     TEXT REFERENCES usage_profiles(key),
    credits         INTEGER NOT NULL DEFAULT 0,
    updated_at      TEXT NOT NULL
);

-- Each credit grant once per reference (the idempotency of the credits route).
CREATE TABLE usage_credit_grants (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    reference       TEXT NOT NULL,
    conversations   INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (organization_id, reference)
);

-- Capacity held by work in flight (an answer between its reservation and its commit). Deleted in
-- the transaction that commits the work (and the meter moves there), or when the work fails.
-- Rows left by a dead process are swept at start; a row past `expires_at` holds nothing.
CREATE TABLE usage_reservations (
    id              TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    meter           TEXT NOT NULL,
    period          TEXT NOT NULL,
    amount          INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL
);
CREATE INDEX usage_reservations_org ON usage_reservations(organization_id, meter, period, expires_at);

-- The 80 % and 100 % notices, one per account, meter, period and threshold.
CREATE TABLE usage_notices (
    organization_id TEXT NOT NULL,
    meter           TEXT NOT NULL,
    period          TEXT NOT NULL,
    threshold       INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (organization_id, meter, period, threshold)
);

-- Organizations created through POST /api/v1/account/accounts, per user (the creation cap), and
-- per-user overrides of the cap (NULL monthly_limit = unlimited).
CREATE TABLE org_creations (
    user_id         TEXT NOT NULL,
    organization_id TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX org_creations_user ON org_creations(user_id, created_at);
CREATE TABLE org_creation_overrides (
    user_id         TEXT PRIMARY KEY,
    monthly_limit   INTEGER,
    updated_at      TEXT NOT NULL
);

-- The answer usage per agent and day (answers and model tokens, local models included).
CREATE TABLE usage_answer_daily (
    organization_id TEXT NOT NULL,
    workspace_id    TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    day             TEXT NOT NULL,
    answers         INTEGER NOT NULL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, day, workspace_id, agent_id)
);
