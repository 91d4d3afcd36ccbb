-- Evals. Owned by `evals`.
-- A snapshot freezes one conversation up to an assistant answer and what stood behind that answer
-- (`body`: messages, instruction block, model, retrieval settings, agent configuration, retrieval
-- result, as the evals module's stored JSON). Snapshots never change.
CREATE TABLE eval_snapshots (
    id                      TEXT PRIMARY KEY,
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id                TEXT NOT NULL,
    source_conversation_id  TEXT NOT NULL,
    source_message_id       TEXT,
    fidelity                TEXT NOT NULL CHECK (fidelity IN ('full', 'messages_only')),
    body                    TEXT NOT NULL,
    captured_at             TEXT NOT NULL,
    captured_by             TEXT
);
CREATE INDEX eval_snapshots_ws ON eval_snapshots(workspace_id, captured_at);

-- A case: a snapshot with a name and up to 20 assertions. At most one case per source message
-- (the by-source-message routes are idempotent under concurrency through this index).
CREATE TABLE eval_cases (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    snapshot_id         TEXT NOT NULL REFERENCES eval_snapshots(id) ON DELETE CASCADE,
    agent_id            TEXT NOT NULL,
    source_message_id   TEXT,
    name                TEXT NOT NULL,
    -- the question the snapshot replays (its last user message), for lists
    question            TEXT,
    assertions          TEXT NOT NULL DEFAULT '[]',
    assertion_count     INTEGER NOT NULL DEFAULT 0,
    status              TEXT NOT NULL CHECK (status IN ('pending', 'passing', 'failing', 'error')),
    last_run_id         TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX eval_cases_ws ON eval_cases(workspace_id, created_at, id);
CREATE UNIQUE INDEX eval_cases_source ON eval_cases(workspace_id, source_message_id)
    WHERE source_message_id IS NOT NULL;

-- A suite: cases run one after another (optionally each `repeat` times) against one agent
-- configuration, with progress while it runs. A comparison runs two suites side by side.
CREATE TABLE eval_suites (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id        TEXT,
    comparison_id   TEXT,
    side            TEXT,
    revision_id     TEXT,
    mode            TEXT NOT NULL CHECK (mode IN ('retrieval_only', 'full_assistant')),
    repeat_count    INTEGER NOT NULL DEFAULT 1,
    pass_threshold  INTEGER NOT NULL DEFAULT 1,
    case_ids        TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed')),
    done            INTEGER NOT NULL DEFAULT 0,
    total           INTEGER NOT NULL DEFAULT 0,
    -- [{caseId, status, runIds, passes, flaky, reason}] in run order
    results         TEXT NOT NULL DEFAULT '[]',
    summary         TEXT,
    error           TEXT,
    idempotency_key TEXT,
    created_by      TEXT,
    created_at      TEXT NOT NULL,
    completed_at    TEXT
);
CREATE INDEX eval_suites_ws ON eval_suites(workspace_id, created_at, id);
CREATE INDEX eval_suites_comparison ON eval_suites(comparison_id) WHERE comparison_id IS NOT NULL;
CREATE UNIQUE INDEX eval_suites_key ON eval_suites(workspace_id, idempotency_key, side)
    WHERE idempotency_key IS NOT NULL;

-- One run of one case (or of a bare snapshot): what it ran with and what it saw.
CREATE TABLE eval_runs (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    snapshot_id         TEXT NOT NULL,
    case_id             TEXT,
    suite_id            TEXT,
    mode                TEXT NOT NULL,
    revision_id         TEXT,
    overrides           TEXT NOT NULL DEFAULT '{}',
    resolved_config     TEXT NOT NULL DEFAULT '{}',
    observed_output     TEXT NOT NULL DEFAULT '{}',
    -- the assertions as they were when the run started
    assertions          TEXT NOT NULL DEFAULT '[]',
    status              TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'error', 'recorded')),
    outcome_reason      TEXT,
    verdicts            TEXT NOT NULL DEFAULT '[]',
    started_at          TEXT NOT NULL,
    completed_at        TEXT
);
CREATE INDEX eval_runs_case ON eval_runs(case_id, started_at);
CREATE INDEX eval_runs_suite ON eval_runs(suite_id);
