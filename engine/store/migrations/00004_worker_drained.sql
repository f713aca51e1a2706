-- +goose Up
-- 'drained': an operator drain has finished (nothing left in flight); the
-- worker process may still be alive. Like 'cordoned' it is the operator's
-- decision and survives the worker's restarts and heartbeats; only
-- uncordon makes the worker active again. See engine/worker/doc.go.
ALTER TABLE workers DROP CONSTRAINT workers_status_check;
ALTER TABLE workers ADD CONSTRAINT workers_status_check
    CHECK (status IN ('active', 'draining', 'drained', 'cordoned', 'inactive'));

-- +goose Down
UPDATE workers SET status = 'cordoned' WHERE status = 'drained';
ALTER TABLE workers DROP CONSTRAINT workers_status_check;
ALTER TABLE workers ADD CONSTRAINT workers_status_check
    CHECK (status IN ('active', 'draining', 'cordoned', 'inactive'));
