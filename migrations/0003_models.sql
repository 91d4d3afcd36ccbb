-- Models: workspace provider credentials (encrypted), and the per-chunk facts enrichment adds.
-- Model preferences and the document type catalog are workspace settings (workspace_settings).

CREATE TABLE provider_credentials (
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    provider        TEXT NOT NULL CHECK (provider IN ('openai', 'openai-compatible', 'claude', 'gemini')),
    -- AES-256-GCM under the deployment key named by key_id; AAD 'credential:<workspace>:<provider>'
    key_id          TEXT NOT NULL,
    nonce           BLOB NOT NULL,
    ciphertext      BLOB NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (workspace_id, provider)
);
