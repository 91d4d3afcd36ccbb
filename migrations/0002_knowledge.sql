-- Knowledge: sources, documents, chunks (with their embeddings), the index change log, search
-- history, per-workspace settings, usage events and meters.

CREATE TABLE workspace_settings (
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    namespace       TEXT NOT NULL,
    value           TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (workspace_id, namespace)
);

-- Where documents come from. Every document belongs to one. `builtin` sources ('api', 'upload')
-- are created on demand per workspace; crawl and connector sources carry their config.
CREATE TABLE sources (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    kind                TEXT NOT NULL CHECK (kind IN ('api', 'upload', 'website', 'connector')),
    name                TEXT NOT NULL,
    external_id         TEXT,
    builtin             INTEGER NOT NULL DEFAULT 0,
    config              TEXT NOT NULL DEFAULT '{}',
    metadata            TEXT NOT NULL DEFAULT '{}',
    enrichment_override TEXT NOT NULL DEFAULT 'inherit' CHECK (enrichment_override IN ('inherit', 'on', 'off')),
    crawl_state         TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX sources_ws ON sources(workspace_id, created_at);
CREATE UNIQUE INDEX sources_builtin ON sources(workspace_id, kind) WHERE builtin = 1;

CREATE TABLE documents (
    id                      TEXT PRIMARY KEY,
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    source_id               TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    title                   TEXT NOT NULL,
    external_document_id    TEXT,
    status                  TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'ready', 'failed')),
    failure_reason          TEXT,
    -- increases on every content or metadata change; jobs carry the revision they were made for
    revision                INTEGER NOT NULL DEFAULT 1,
    -- the revision whose chunks are live in search (NULL before the first success)
    indexed_revision        INTEGER,
    metadata                TEXT NOT NULL DEFAULT '{}',
    source_kind             TEXT NOT NULL CHECK (source_kind IN ('inline_text', 'uploaded_file')),
    -- inline text as given, or the text extracted from the upload
    content                 TEXT,
    content_hash            TEXT,
    content_size_bytes      INTEGER NOT NULL DEFAULT 0,
    blob_sha256             TEXT,
    source_filename         TEXT,
    source_mime_type        TEXT,
    source_size_bytes       INTEGER,
    detected_format         TEXT,
    chunk_count             INTEGER NOT NULL DEFAULT 0,
    -- bytes this document counts toward the stored-bytes meter (its live revision)
    metered_bytes           INTEGER NOT NULL DEFAULT 0,
    enrichment              TEXT,
    processed_at            TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL
);
CREATE INDEX documents_ws ON documents(workspace_id, created_at);
CREATE INDEX documents_source ON documents(source_id, created_at);
CREATE INDEX documents_status ON documents(workspace_id, status);
CREATE UNIQUE INDEX documents_external ON documents(workspace_id, source_id, external_document_id)
    WHERE external_document_id IS NOT NULL;

-- Chunks of a document revision. The integer rowid is the key in both search indexes.
-- `embedding` is NULL until the embedding pipeline has computed it (little-endian f32).
CREATE TABLE chunks (
    rowid           INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    document_id     TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    workspace_id    TEXT NOT NULL,
    revision        INTEGER NOT NULL,
    chunk_index     INTEGER NOT NULL,
    content         TEXT NOT NULL,
    start_offset    INTEGER NOT NULL,
    end_offset      INTEGER NOT NULL,
    heading_path    TEXT,
    page            INTEGER,
    sheet           TEXT,
    kind            TEXT NOT NULL DEFAULT 'text',
    metadata        TEXT NOT NULL DEFAULT '{}',
    content_hash    TEXT NOT NULL,
    token_count     INTEGER,
    embedding       BLOB,
    created_at      TEXT NOT NULL
);
CREATE INDEX chunks_doc ON chunks(document_id, revision, chunk_index);
CREATE INDEX chunks_pending ON chunks(rowid) WHERE embedding IS NULL;
CREATE INDEX chunks_hash ON chunks(workspace_id, content_hash);

-- The search indexes' change log: every chunk that becomes live is an 'add', every chunk row
-- deleted is a 'del' (by trigger, so cascades are covered). Indexes record the last seq they
-- applied and replay the rest at start.
CREATE TABLE index_ops (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    op              TEXT NOT NULL CHECK (op IN ('add', 'del')),
    chunk_rowid     INTEGER NOT NULL,
    workspace_id    TEXT NOT NULL
);
CREATE TRIGGER chunks_deleted AFTER DELETE ON chunks
BEGIN
    INSERT INTO index_ops (op, chunk_rowid, workspace_id) VALUES ('del', OLD.rowid, OLD.workspace_id);
END;

CREATE TABLE index_state (
    name            TEXT PRIMARY KEY,
    applied_seq     INTEGER NOT NULL,
    updated_at      TEXT NOT NULL
);

-- Every search, with the exact result set it returned (for replay).
CREATE TABLE searches (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    actor_type      TEXT NOT NULL,
    actor_id        TEXT,
    query           TEXT NOT NULL,
    metadata_filter TEXT,
    mode            TEXT NOT NULL,
    results         TEXT NOT NULL,
    result_count    INTEGER NOT NULL,
    took_ms         REAL NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX searches_ws ON searches(workspace_id, created_at);

-- Immutable usage events (one per embedding call of a document revision, ...).
CREATE TABLE usage_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,
    organization_id TEXT NOT NULL,
    workspace_id    TEXT NOT NULL,
    kind            TEXT NOT NULL,
    document_id     TEXT,
    revision        INTEGER,
    provider        TEXT NOT NULL,
    model           TEXT NOT NULL,
    input_bytes     INTEGER NOT NULL,
    vector_count    INTEGER NOT NULL,
    tokens          INTEGER NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX usage_events_org ON usage_events(organization_id, created_at);

CREATE TABLE usage_daily (
    organization_id TEXT NOT NULL,
    day             TEXT NOT NULL,
    kind            TEXT NOT NULL,
    provider        TEXT NOT NULL,
    model           TEXT NOT NULL,
    events          INTEGER NOT NULL,
    input_bytes     INTEGER NOT NULL,
    vector_count    INTEGER NOT NULL,
    tokens          INTEGER NOT NULL,
    PRIMARY KEY (organization_id, day, kind, provider, model)
);

-- Meters: 'stored_indexed_bytes' (period '') and 'monthly_indexed_bytes' (period 'YYYY-MM').
CREATE TABLE usage_meters (
    organization_id TEXT NOT NULL,
    meter           TEXT NOT NULL,
    period          TEXT NOT NULL,
    value           INTEGER NOT NULL,
    PRIMARY KEY (organization_id, meter, period)
);
