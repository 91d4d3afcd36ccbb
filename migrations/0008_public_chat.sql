-- Public chat: conversations remember the anonymous visitor session they belong to, and bootstrap
-- greetings wait (unsaved as conversations) until the visitor's first message carries their id.

ALTER TABLE conversations ADD COLUMN public_session_id TEXT;
CREATE INDEX conversations_public_session ON conversations (workspace_id, public_session_id, updated_at)
    WHERE public_session_id IS NOT NULL;

CREATE TABLE public_greetings (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id            TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    public_session_id   TEXT NOT NULL,
    -- the greeting as shown (text and its authored chips, JSON)
    text                TEXT NOT NULL,
    suggestions         TEXT NOT NULL DEFAULT '[]',
    -- exact (Exact words, verbatim) or generated
    kind                TEXT NOT NULL,
    locale              TEXT,
    created_at          TEXT NOT NULL
);
CREATE INDEX public_greetings_created ON public_greetings (created_at);
