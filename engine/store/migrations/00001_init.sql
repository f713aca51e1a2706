-- +goose Up
-- Packs group actions; the core pack is built in, others load from pack dirs.
CREATE TABLE packs (
    ref         text PRIMARY KEY,
    description text NOT NULL DEFAULT '',
    path        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE actions (
    ref             text PRIMARY KEY,
    pack_ref        text NOT NULL REFERENCES packs (ref) ON DELETE CASCADE,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    runtime         text NOT NULL CHECK (runtime IN ('builtin', 'shell', 'python', 'node')),
    entrypoint      text NOT NULL,
    parameters      jsonb NOT NULL DEFAULT '{}',          -- JSON Schema of the parameters
    timeout_seconds double precision NOT NULL DEFAULT 0 CHECK (timeout_seconds >= 0),
    retry           jsonb NOT NULL DEFAULT '{}',          -- retry policy (max_retries, backoff, retry_on)
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- One admission policy per action. NULL concurrency_limit = unlimited.
CREATE TABLE policies (
    action_ref            text PRIMARY KEY REFERENCES actions (ref) ON DELETE CASCADE,
    concurrency_limit     integer CHECK (concurrency_limit IS NULL OR concurrency_limit > 0),
    group_by              text[] NOT NULL DEFAULT '{}',
    on_limit              text NOT NULL DEFAULT 'enqueue' CHECK (on_limit IN ('enqueue', 'cancel')),
    max_queue_length      integer CHECK (max_queue_length IS NULL OR max_queue_length > 0),   -- NULL = config default
    queue_timeout_seconds integer CHECK (queue_timeout_seconds IS NULL OR queue_timeout_seconds > 0),
    rate_max              integer CHECK (rate_max IS NULL OR rate_max > 0),
    rate_window_seconds   double precision CHECK (rate_window_seconds IS NULL OR rate_window_seconds > 0),
    paused                boolean NOT NULL DEFAULT false,
    updated_at            timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE executions (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action_ref          text NOT NULL,
    parameters          jsonb NOT NULL DEFAULT '{}',
    status              text NOT NULL CHECK (status IN ('requested', 'scheduling', 'queued', 'scheduled', 'running',
                            'succeeded', 'failed', 'timeout', 'canceling', 'cancelled', 'abandoned')),
    status_reason       text,                              -- why the last transition happened; copied into history
    group_key           text NOT NULL DEFAULT '',
    result              jsonb,
    error               text,
    worker_id           text,
    attempt             integer NOT NULL DEFAULT 1,
    retry_of            bigint REFERENCES executions (id) ON DELETE SET NULL, -- the attempt this one retries/replays
    timeout_seconds     double precision,
    stdout              text,
    stderr              text,
    stdout_truncated    boolean NOT NULL DEFAULT false,
    stderr_truncated    boolean NOT NULL DEFAULT false,
    exit_code           integer,
    duration_ms         double precision,
    cancel_requested_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    admitted_at         timestamptz,
    scheduled_at        timestamptz,
    started_at          timestamptz,
    finished_at         timestamptz
);
CREATE INDEX executions_status_id ON executions (status, id);
CREATE INDEX executions_action_id ON executions (action_ref, id);
CREATE INDEX executions_unfinished ON executions (status, updated_at)
    WHERE status IN ('requested', 'scheduling', 'queued', 'scheduled', 'running', 'canceling');
CREATE INDEX executions_worker_unfinished ON executions (worker_id)
    WHERE status IN ('scheduled', 'running', 'canceling');

-- Every status change, recorded by trigger so no code path can forget it.
CREATE TABLE execution_status_history (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id bigint NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    from_status  text,
    to_status    text NOT NULL,
    reason       text,
    worker_id    text,
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX execution_status_history_execution ON execution_status_history (execution_id, id);

-- +goose StatementBegin
CREATE FUNCTION record_execution_status() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO execution_status_history (execution_id, from_status, to_status, reason, worker_id)
        VALUES (NEW.id, NULL, NEW.status, NEW.status_reason, NEW.worker_id);
    ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
        INSERT INTO execution_status_history (execution_id, from_status, to_status, reason, worker_id)
        VALUES (NEW.id, OLD.status, NEW.status, NEW.status_reason, NEW.worker_id);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER executions_status_history AFTER INSERT OR UPDATE OF status ON executions
    FOR EACH ROW EXECUTE FUNCTION record_execution_status();

-- Admission: one row per (action, group key) with its limit and counters.
-- Locked FOR UPDATE by every acquire/release so FIFO holds across replicas.
CREATE TABLE admission_groups (
    action_ref        text NOT NULL,
    group_key         text NOT NULL,
    concurrency_limit integer,                 -- NULL = unlimited
    active_count      integer NOT NULL DEFAULT 0 CHECK (active_count >= 0),
    queue_length      integer NOT NULL DEFAULT 0 CHECK (queue_length >= 0),
    next_seq          bigint NOT NULL DEFAULT 1,
    total_enqueued    bigint NOT NULL DEFAULT 0,
    total_completed   bigint NOT NULL DEFAULT 0,
    window_started_at timestamptz,             -- rate limit: start of the current window
    window_count      integer NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (action_ref, group_key)
);

-- One entry per execution that holds or waits for a slot.
CREATE TABLE admission_entries (
    execution_id bigint PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    action_ref   text NOT NULL,
    group_key    text NOT NULL,
    seq          bigint NOT NULL,
    state        text NOT NULL CHECK (state IN ('queued', 'active')),
    enqueued_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    admitted_at  timestamptz,
    UNIQUE (action_ref, group_key, seq)
);
CREATE INDEX admission_entries_queued ON admission_entries (action_ref, group_key, seq) WHERE state = 'queued';
CREATE INDEX admission_entries_queued_age ON admission_entries (enqueued_at) WHERE state = 'queued';

-- queue_stats is derived telemetry: a view over the admission rows, which are
-- updated in the same transactions as admission itself, so it cannot drift.
CREATE VIEW queue_stats AS
SELECT g.action_ref,
       g.group_key,
       g.queue_length,
       g.active_count,
       g.concurrency_limit AS max_concurrent,
       (SELECT min(e.enqueued_at) FROM admission_entries e
         WHERE e.action_ref = g.action_ref AND e.group_key = g.group_key AND e.state = 'queued') AS oldest_enqueued_at,
       g.total_enqueued,
       g.total_completed,
       g.updated_at AS last_updated
FROM admission_groups g;

CREATE TABLE workers (
    id           text PRIMARY KEY,
    host         text NOT NULL,
    runtimes     text[] NOT NULL DEFAULT '{}',
    capacity     integer NOT NULL CHECK (capacity > 0),
    running      integer NOT NULL DEFAULT 0,
    status       text NOT NULL CHECK (status IN ('active', 'draining', 'cordoned', 'inactive')),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz NOT NULL DEFAULT now(),
    stopped_at   timestamptz,
    version      text NOT NULL DEFAULT ''
);

CREATE TABLE dead_letters (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue               text NOT NULL,
    exchange            text NOT NULL DEFAULT '',
    routing_key         text NOT NULL DEFAULT '',
    reason              text NOT NULL,
    death_count         bigint NOT NULL DEFAULT 1,
    first_death_at      timestamptz,
    execution_id        bigint,                  -- no FK: the record outlives the execution
    message_type        text NOT NULL DEFAULT '',
    payload             bytea NOT NULL,
    headers             jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    replayed_at         timestamptz,
    replay_execution_id bigint
);
CREATE INDEX dead_letters_created ON dead_letters (id DESC);
CREATE INDEX dead_letters_reason ON dead_letters (reason, id DESC);
CREATE INDEX dead_letters_execution ON dead_letters (execution_id);

-- +goose Down
DROP TABLE dead_letters;
DROP TABLE workers;
DROP VIEW queue_stats;
DROP TABLE admission_entries;
DROP TABLE admission_groups;
DROP TABLE execution_status_history;
DROP FUNCTION record_execution_status() CASCADE;
DROP TABLE executions;
DROP TABLE policies;
DROP TABLE actions;
DROP TABLE packs;
