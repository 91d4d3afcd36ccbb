-- Hardening: per-workspace usage reads, and sensitive context values sealed at rest.

-- Usage scoped to one workspace reads the immutable events by workspace and day.
CREATE INDEX usage_events_ws ON usage_events(workspace_id, created_at);

-- A value of a sensitive variable is stored sealed (AES-256-GCM with the deployment key, bound to
-- the workspace, variable and scope): `data` is then '' and `nonce`/`ciphertext` hold it. Values
-- written before this migration stay in `data` until the server seals them at start.
ALTER TABLE context_values ADD COLUMN nonce BLOB;
ALTER TABLE context_values ADD COLUMN ciphertext BLOB;
