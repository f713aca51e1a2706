-- +goose Up
-- Retries and replays. An attempt is followed by at most one new attempt,
-- whether an automatic retry or an operator's replay of its dead letter:
-- both set retry_of, and this index makes the second one fail instead of
-- running the action twice (two executors, duplicate messages, a replay
-- racing a retry).
CREATE UNIQUE INDEX executions_one_successor ON executions (retry_of) WHERE retry_of IS NOT NULL;

-- The retry decision for a finished attempt, kept on its row so a planned
-- retry survives a crash during its backoff:
--   NULL      not decided yet (the completion has not been handled)
--   'pending' a retry is due at retry_at (the recovery loop requests it)
--   'done'    the retry (or a replay) was requested
--   'none'    the policy does not retry this outcome
ALTER TABLE executions ADD COLUMN retry_state text CHECK (retry_state IN ('pending', 'done', 'none'));
ALTER TABLE executions ADD COLUMN retry_at timestamptz;
CREATE INDEX executions_retry_pending ON executions (retry_at) WHERE retry_state = 'pending';
-- Finished attempts whose completion was never handled (its message lost),
-- searched per action that retries: attempts of actions without a retry
-- policy stay undecided forever and must not be scanned.
CREATE INDEX executions_retry_undecided ON executions (action_ref, finished_at)
    WHERE retry_state IS NULL AND status IN ('failed', 'timeout', 'abandoned');

-- Dead letters are recorded once per death: a redelivery of the same dead
-- letter (the consumer died before its ack) has the same dedupe key.
ALTER TABLE dead_letters ADD COLUMN message_id text NOT NULL DEFAULT '';
ALTER TABLE dead_letters ADD COLUMN dedupe_key text;
CREATE UNIQUE INDEX dead_letters_dedupe ON dead_letters (dedupe_key);
CREATE INDEX dead_letters_queue ON dead_letters (queue, id DESC);

-- +goose Down
DROP INDEX dead_letters_queue;
DROP INDEX dead_letters_dedupe;
ALTER TABLE dead_letters DROP COLUMN dedupe_key;
ALTER TABLE dead_letters DROP COLUMN message_id;
DROP INDEX executions_retry_undecided;
DROP INDEX executions_retry_pending;
ALTER TABLE executions DROP COLUMN retry_at;
ALTER TABLE executions DROP COLUMN retry_state;
DROP INDEX executions_one_successor;
