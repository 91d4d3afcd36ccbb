-- Each workspace's knowledge index: the language its text is analyzed in (lexical search), the
-- embedding space its vectors are in (one model at one sequence limit, `all-minilm-l6-v2@256`),
-- and how long its search history is kept (days, entries).
-- While a re-embedding runs, `target_space` is the space it moves to and `reembed_*` its progress;
-- the new vectors wait in `chunks.next_embedding` and replace the old ones in one transaction.
-- Owned by `search`.
CREATE TABLE search_workspaces (
    workspace_id        TEXT PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    language            TEXT NOT NULL DEFAULT 'en',
    -- the operator's choice of model; NULL: the default for the language
    model               TEXT,
    space               TEXT NOT NULL,
    target_space        TEXT,
    reembed_total       INTEGER NOT NULL DEFAULT 0,
    reembed_done        INTEGER NOT NULL DEFAULT 0,
    reembed_started_at  TEXT,
    history_days        INTEGER NOT NULL DEFAULT 90,
    history_max         INTEGER NOT NULL DEFAULT 10000,
    updated_at          TEXT NOT NULL
);

-- Workspaces that exist now were embedded before spaces existed: MiniLM truncating at 128 tokens.
INSERT INTO search_workspaces (workspace_id, space, updated_at)
    SELECT id, 'all-minilm-l6-v2@128', created_at FROM workspaces;

-- The space a chunk's `embedding` is in (NULL: the legacy space above), and its vector in the
-- target space while its workspace is re-embedded.
ALTER TABLE chunks ADD COLUMN embedding_space TEXT;
ALTER TABLE chunks ADD COLUMN next_embedding BLOB;
CREATE INDEX chunks_reembed ON chunks(workspace_id, rowid) WHERE embedding IS NOT NULL AND next_embedding IS NULL;
