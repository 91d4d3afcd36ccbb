-- Conversations and their messages, turn traces (ids, decisions and timings; never message
-- content), and private test executions against an agent's draft or candidate revisions.

CREATE TABLE conversations (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id            TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    -- the agent revision the conversation started on; every turn uses it (null: a test
    -- conversation on a frozen draft, held by its test execution)
    revision_id         TEXT,
    -- api (REST chat), test (private test execution); later: public, embed, mcp
    channel             TEXT NOT NULL,
    -- test conversations never appear in visitor or operator history
    visibility          TEXT NOT NULL DEFAULT 'visitor' CHECK (visibility IN ('visitor', 'test')),
    test_execution_id   TEXT,
    ownership_state     TEXT NOT NULL DEFAULT 'ai_owned' CHECK (ownership_state IN ('ai_owned', 'human_owned')),
    ownership_version   INTEGER NOT NULL DEFAULT 0,
    ownership_reason    TEXT,
    owner_user_id       TEXT,
    taken_over_at       TEXT,
    -- set once an operator replied while the conversation is human-owned (no more waiting lines)
    operator_replied    INTEGER NOT NULL DEFAULT 0,
    -- routine, clarification and directive state carried between turns (JSON object)
    state               TEXT NOT NULL DEFAULT '{}',
    started_by          TEXT,
    message_count       INTEGER NOT NULL DEFAULT 0,
    last_message_at     TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX conversations_ws ON conversations(workspace_id, visibility, updated_at);
CREATE INDEX conversations_agent ON conversations(agent_id, created_at);

CREATE TABLE messages (
    id                  TEXT PRIMARY KEY,
    conversation_id     TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    workspace_id        TEXT NOT NULL,
    -- position in the conversation, from 1
    seq                 INTEGER NOT NULL,
    role                TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    -- visitor, agent, human_agent, greeting, seed
    source              TEXT NOT NULL,
    content             TEXT NOT NULL,
    citations           TEXT NOT NULL DEFAULT '[]',
    -- answerCoverage, segments, suggestions, turnFailure, outcome (JSON object)
    metadata            TEXT NOT NULL DEFAULT '{}',
    trace_id            TEXT,
    request_id          TEXT,
    created_at          TEXT NOT NULL
);
CREATE UNIQUE INDEX messages_seq ON messages(conversation_id, seq);

CREATE TABLE turn_traces (
    id                      TEXT PRIMARY KEY,
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    conversation_id         TEXT,
    agent_id                TEXT,
    revision_id             TEXT,
    user_message_id         TEXT,
    message_id              TEXT,
    request_id              TEXT,
    -- chat, retrieval_answer, test
    surface                 TEXT NOT NULL,
    route                   TEXT,
    outcome                 TEXT,
    availability            TEXT,
    coverage                TEXT,
    coverage_reason         TEXT,
    -- the grounding diagnostic; all null when none was computed (direct or suppressed turns)
    grounding_verdict       TEXT,
    claim_count             INTEGER,
    sourced_claim_count     INTEGER,
    unsourced_claim_count   INTEGER,
    invalid_source_count    INTEGER,
    trace                   TEXT NOT NULL,
    created_at              TEXT NOT NULL
);
CREATE INDEX turn_traces_quality ON turn_traces(workspace_id, surface, created_at);

CREATE TABLE test_executions (
    id                      TEXT PRIMARY KEY,
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id                TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    mode                    TEXT NOT NULL CHECK (mode IN ('single', 'compare')),
    -- [{label, revisionId (null = the frozen draft), conversationId}]
    sides                   TEXT NOT NULL,
    -- the draft as it was when the execution started (a later draft change does not move it)
    frozen_draft            TEXT,
    draft_generation        INTEGER NOT NULL,
    seed_conversation_id    TEXT,
    test_values             TEXT NOT NULL DEFAULT '[]',
    skill_effects           TEXT NOT NULL DEFAULT 'suppressed',
    idempotency_key         TEXT,
    created_by              TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL
);
CREATE INDEX test_executions_agent ON test_executions(agent_id, created_at);
CREATE UNIQUE INDEX test_executions_key ON test_executions(agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
