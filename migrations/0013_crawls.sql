-- Website crawls. Owned by `crawler`.
-- A crawl job is one run over a website source: its counters, its kept failures and skips, and
-- whether it may remove pages it did not see (`fresh`: never paused, resumed or restarted).
CREATE TABLE crawl_jobs (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    source_id       TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    kind            TEXT NOT NULL CHECK (kind IN ('crawl', 'recrawl')),
    requested_url   TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'paused', 'completed', 'failed')),
    page_limit      INTEGER NOT NULL,
    fresh           INTEGER NOT NULL DEFAULT 1,
    -- the run that owns the job while it is processing: a run whose id this is not (it was
    -- paused, or the process that started it died) saves nothing more
    run_id          TEXT,
    discovered      INTEGER NOT NULL DEFAULT 0,
    fetched         INTEGER NOT NULL DEFAULT 0,
    indexed         INTEGER NOT NULL DEFAULT 0,
    unchanged       INTEGER NOT NULL DEFAULT 0,
    failed          INTEGER NOT NULL DEFAULT 0,
    -- failures that leave a page's state unknown (not a 404 or 410): any of them and the run
    -- removes nothing it did not see
    uncertain       INTEGER NOT NULL DEFAULT 0,
    skipped         INTEGER NOT NULL DEFAULT 0,
    removed         INTEGER NOT NULL DEFAULT 0,
    -- skip code -> count
    skipped_by      TEXT NOT NULL DEFAULT '{}',
    -- [{sourceUrl, reason}] and [{sourceUrl, reason, code}], the first 200 of each
    failures        TEXT NOT NULL DEFAULT '[]',
    skips           TEXT NOT NULL DEFAULT '[]',
    last_error      TEXT,
    -- whether the frontier was cut by the page limit (then nothing is removed)
    truncated       INTEGER NOT NULL DEFAULT 0,
    started_at      TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    completed_at    TEXT
);
CREATE INDEX crawl_jobs_ws ON crawl_jobs(workspace_id, created_at);
CREATE INDEX crawl_jobs_source ON crawl_jobs(source_id, created_at);

-- The checkpoint of a job: every URL it discovered (its seen set), in discovery order, and which
-- are done. A page's row turns `done` in the same transaction as its document, so a restart
-- continues with exactly the pages not yet done.
CREATE TABLE crawl_frontier (
    job_id      TEXT NOT NULL REFERENCES crawl_jobs(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    url_key     TEXT NOT NULL,
    url         TEXT NOT NULL,
    depth       INTEGER NOT NULL,
    -- 1: a seed that does not match the include patterns, fetched for discovery only
    discovery   INTEGER NOT NULL DEFAULT 0,
    done        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, url_key)
);
CREATE INDEX crawl_frontier_next ON crawl_frontier(job_id, done, seq);
CREATE INDEX crawl_frontier_seq ON crawl_frontier(job_id, seq);

-- What the crawler knows of each page of a website source: its validators and content hash (for
-- conditional and unchanged recrawls), its links (replayed when the page answers 304), and the
-- document it is indexed as.
CREATE TABLE crawl_pages (
    source_id       TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    url_key         TEXT NOT NULL,
    url             TEXT NOT NULL,
    document_id     TEXT,
    etag            TEXT,
    last_modified   TEXT,
    content_hash    TEXT,
    links           TEXT NOT NULL DEFAULT '[]',
    last_job_id     TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (source_id, url_key)
);
CREATE INDEX crawl_pages_hash ON crawl_pages(source_id, content_hash);
