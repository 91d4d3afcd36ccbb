-- Connectors (issue 35): the built-in WordPress and WhatsApp connectors of each workspace, and
-- WhatsApp's senders, batches and message log.

CREATE TABLE connectors (
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    connector_id            TEXT NOT NULL CHECK (connector_id IN ('wordpress', 'whatsapp')),
    enabled                 INTEGER NOT NULL DEFAULT 0,
    -- plain config values (JSON object of strings)
    config                  TEXT NOT NULL DEFAULT '{}',
    -- sealed secrets (JSON object: key -> {nonce, ciphertext}), never returned
    secrets                 TEXT NOT NULL DEFAULT '{}',
    -- the unique channel field (WordPress: the site URL; WhatsApp: the phone number id)
    channel_key             TEXT,
    -- WordPress: the document source registered on enable
    source_id               TEXT,
    sync_status             TEXT NOT NULL DEFAULT 'idle' CHECK (sync_status IN ('idle', 'queued', 'running')),
    -- the run the status belongs to; a job of another run does nothing
    sync_run_id             TEXT,
    sync_mode               TEXT,
    -- a push arrived while a run was active: run again when it ends
    sync_again              INTEGER NOT NULL DEFAULT 0,
    -- {seen, indexed, unchanged, removed}
    sync_progress           TEXT,
    backfill_completed_at   TEXT,
    last_sync_at            TEXT,
    last_sync_finished_at   TEXT,
    modified_cursor         TEXT,
    last_ingested_count     INTEGER,
    last_error              TEXT,
    -- the current chain of polls; a poll job of another chain does nothing
    poll_token              TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (workspace_id, connector_id)
);
CREATE UNIQUE INDEX connectors_channel ON connectors (connector_id, channel_key) WHERE channel_key IS NOT NULL;

-- A WhatsApp customer of a workspace: the conversation they are on and when they last wrote
-- (the 24-hour customer service window).
CREATE TABLE whatsapp_contacts (
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    wa_id                   TEXT NOT NULL,
    profile_name            TEXT,
    conversation_id         TEXT,
    -- the last inbound message that went to conversation_id
    conversation_last_at    TEXT,
    last_inbound_at         TEXT NOT NULL,
    created_at              TEXT NOT NULL,
    PRIMARY KEY (workspace_id, wa_id)
);

-- Which customer a WhatsApp conversation is with (kept when the customer moves on to a new one,
-- so an operator's late reply still reaches them).
CREATE TABLE whatsapp_threads (
    conversation_id         TEXT PRIMARY KEY REFERENCES conversations(id) ON DELETE CASCADE,
    workspace_id            TEXT NOT NULL,
    wa_id                   TEXT NOT NULL,
    created_at              TEXT NOT NULL
);

-- A burst of text messages from one sender answered as one turn.
CREATE TABLE whatsapp_batches (
    id                      TEXT PRIMARY KEY,
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    wa_id                   TEXT NOT NULL,
    conversation_id         TEXT,
    -- the turn in progress (its user message carries it as turnId)
    turn_id                 TEXT NOT NULL,
    -- the queue job running the batch
    job_id                  INTEGER NOT NULL,
    status                  TEXT NOT NULL CHECK (status IN ('running', 'answered', 'failed')),
    error                   TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL
);
CREATE INDEX whatsapp_batches_sender ON whatsapp_batches (workspace_id, wa_id, status);

-- The message log (90 days): what customers sent and what was sent to them.
CREATE TABLE whatsapp_messages (
    id                      TEXT PRIMARY KEY,
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    direction               TEXT NOT NULL CHECK (direction IN ('in', 'out')),
    -- inbound: Meta's message id (duplicates are ignored)
    wa_message_id           TEXT,
    wa_id                   TEXT NOT NULL,
    -- text, image, audio, ... (inbound); text (outbound)
    kind                    TEXT NOT NULL,
    body                    TEXT,
    -- in: pending, answered, skipped, unsupported, failed; out: queued, not_sent
    status                  TEXT NOT NULL,
    error                   TEXT,
    batch_id                TEXT,
    conversation_id         TEXT,
    -- out: the conversation message relayed and which part of it
    message_id              TEXT,
    part                    INTEGER,
    delivery_id             TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL
);
CREATE UNIQUE INDEX whatsapp_messages_inbound ON whatsapp_messages (workspace_id, wa_message_id) WHERE direction = 'in';
CREATE UNIQUE INDEX whatsapp_messages_outbound ON whatsapp_messages (workspace_id, message_id, part) WHERE direction = 'out';
CREATE INDEX whatsapp_messages_pending ON whatsapp_messages (workspace_id, wa_id, status) WHERE direction = 'in';
CREATE INDEX whatsapp_messages_time ON whatsapp_messages (workspace_id, created_at);

-- What a WordPress connector knows of each post it indexed: its document and its `modified` time.
-- A sync removes the documents of posts the site no longer lists.
CREATE TABLE wordpress_posts (
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    -- <post type>/<id>
    post_key                TEXT NOT NULL,
    document_id             TEXT NOT NULL,
    modified                TEXT,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (workspace_id, post_key)
);
