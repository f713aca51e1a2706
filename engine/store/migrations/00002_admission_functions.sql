-- +goose Up
-- Admission runs inside PostgreSQL so that acquire, release-and-promote and
-- cancel are each one statement, one transaction and one round trip, and the
-- group row lock (FOR UPDATE) orders every replica's work on a queue.
-- Lock order everywhere: admission_groups row, then admission_entries rows,
-- then executions rows.

-- attune_admit_heads promotes the oldest queued entries of a group while
-- slots (and the rate window) allow. The caller holds the group row lock.
-- Returns the promoted executions and whether each was waiting in status
-- 'queued' (woken: now 'scheduling', needs a wake-up message after commit).
-- +goose StatementBegin
CREATE FUNCTION attune_admit_heads(p_action text, p_group text)
RETURNS TABLE (execution_id bigint, woken boolean, next_window_at timestamptz) AS $$
DECLARE
    g          admission_groups%ROWTYPE;
    pol        policies%ROWTYPE;
    head       bigint;
    was_queued boolean;
    win        interval;
BEGIN
    SELECT * INTO g FROM admission_groups WHERE action_ref = p_action AND group_key = p_group FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO pol FROM policies WHERE action_ref = p_action;
    IF FOUND AND pol.paused THEN
        RETURN;
    END IF;
    IF FOUND THEN
        -- The policy is the source of truth for the limit; the copy on the
        -- group row is for display and may lag a concurrent policy change.
        g.concurrency_limit := pol.concurrency_limit;
    END IF;
    IF pol.rate_max IS NOT NULL THEN
        win := make_interval(secs => pol.rate_window_seconds);
    END IF;
    LOOP
        EXIT WHEN g.queue_length = 0;
        EXIT WHEN g.concurrency_limit IS NOT NULL AND g.active_count >= g.concurrency_limit;
        IF win IS NOT NULL THEN
            IF g.window_started_at IS NULL OR clock_timestamp() >= g.window_started_at + win THEN
                g.window_started_at := clock_timestamp();
                g.window_count := 0;
            END IF;
            IF g.window_count >= pol.rate_max THEN
                -- Tell the caller when the window reopens so it can set a timer.
                execution_id := NULL; woken := false; next_window_at := g.window_started_at + win;
                RETURN NEXT;
                EXIT;
            END IF;
        END IF;
        SELECT e.execution_id INTO head FROM admission_entries e
         WHERE e.action_ref = p_action AND e.group_key = p_group AND e.state = 'queued'
         ORDER BY e.seq LIMIT 1;
        EXIT WHEN NOT FOUND;
        UPDATE admission_entries SET state = 'active', admitted_at = clock_timestamp() WHERE admission_entries.execution_id = head;
        g.active_count := g.active_count + 1;
        g.queue_length := g.queue_length - 1;
        g.window_count := g.window_count + 1;
        UPDATE executions x
           SET admitted_at = clock_timestamp(),
               status = CASE WHEN x.status = 'queued' THEN 'scheduling' ELSE x.status END,
               status_reason = CASE WHEN x.status = 'queued' THEN 'admitted: concurrency slot free' ELSE x.status_reason END,
               updated_at = clock_timestamp()
         WHERE x.id = head
        RETURNING (x.status = 'scheduling' AND x.status_reason = 'admitted: concurrency slot free') INTO was_queued;
        execution_id := head; woken := coalesce(was_queued, false); next_window_at := NULL;
        RETURN NEXT;
    END LOOP;
    UPDATE admission_groups
       SET active_count = g.active_count, queue_length = g.queue_length,
           window_started_at = g.window_started_at, window_count = g.window_count,
           concurrency_limit = g.concurrency_limit, updated_at = now()
     WHERE action_ref = p_action AND group_key = p_group;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- attune_release removes an execution's admission entry (active or queued)
-- exactly once and promotes the next heads. Idempotent: a second call finds
-- no entry and does nothing.
-- +goose StatementBegin
CREATE FUNCTION attune_release(p_execution bigint)
RETURNS TABLE (execution_id bigint, woken boolean, next_window_at timestamptz) AS $$
DECLARE
    ent admission_entries%ROWTYPE;
BEGIN
    SELECT * INTO ent FROM admission_entries e WHERE e.execution_id = p_execution;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Group lock first (see lock order), then re-read the entry under it.
    PERFORM 1 FROM admission_groups g WHERE g.action_ref = ent.action_ref AND g.group_key = ent.group_key FOR UPDATE;
    DELETE FROM admission_entries e WHERE e.execution_id = p_execution RETURNING e.* INTO ent;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF ent.state = 'active' THEN
        UPDATE admission_groups g SET active_count = g.active_count - 1, total_completed = g.total_completed + 1, updated_at = now()
         WHERE g.action_ref = ent.action_ref AND g.group_key = ent.group_key;
    ELSE
        UPDATE admission_groups g SET queue_length = g.queue_length - 1, updated_at = now()
         WHERE g.action_ref = ent.action_ref AND g.group_key = ent.group_key;
    END IF;
    RETURN QUERY SELECT * FROM attune_admit_heads(ent.action_ref, ent.group_key);
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- attune_finish moves an execution from one of p_from to the final status
-- p_to (optionally fenced on worker and attempt), records the outcome and
-- releases its slot, all in one transaction. Returns no rows when the
-- compare-and-swap lost; otherwise one row with finished = true followed by
-- the promoted heads.
-- +goose StatementBegin
CREATE FUNCTION attune_finish(p_id bigint, p_from text[], p_to text, p_worker text, p_attempt integer,
                              p_reason text, p_result jsonb, p_error text, p_stdout text, p_stderr text,
                              p_stdout_truncated boolean, p_stderr_truncated boolean, p_exit_code integer,
                              p_duration_ms double precision)
RETURNS TABLE (execution_id bigint, woken boolean, next_window_at timestamptz, finished boolean) AS $$
DECLARE
    done bigint;
BEGIN
    UPDATE executions x
       SET status = p_to, status_reason = p_reason, result = coalesce(p_result, x.result),
           error = coalesce(p_error, x.error), stdout = coalesce(p_stdout, x.stdout), stderr = coalesce(p_stderr, x.stderr),
           stdout_truncated = coalesce(p_stdout_truncated, x.stdout_truncated),
           stderr_truncated = coalesce(p_stderr_truncated, x.stderr_truncated),
           exit_code = coalesce(p_exit_code, x.exit_code), duration_ms = coalesce(p_duration_ms, x.duration_ms),
           finished_at = clock_timestamp(), updated_at = clock_timestamp()
     WHERE x.id = p_id AND x.status = ANY (p_from)
       AND (p_worker IS NULL OR (x.worker_id = p_worker AND x.attempt = p_attempt))
    RETURNING x.id INTO done;
    IF done IS NULL THEN
        RETURN;
    END IF;
    execution_id := p_id; woken := false; next_window_at := NULL; finished := true;
    RETURN NEXT;
    RETURN QUERY SELECT r.execution_id, r.woken, r.next_window_at, false FROM attune_release(p_id) r;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- attune_request records a new execution and its place in its FIFO queue in
-- one transaction: the queue order is the order requests commit, whichever
-- executor later claims them. Outcome per row: 'created' (the new execution),
-- 'admitted' (a head promoted, maybe the new one), 'queue_full' (nothing
-- written), 'cancelled' (on_limit = cancel and no free slot).
-- +goose StatementBegin
CREATE FUNCTION attune_request(p_action text, p_params jsonb, p_group text, p_max_queue integer,
                               p_timeout double precision, p_retry_of bigint, p_attempt integer)
RETURNS TABLE (execution_id bigint, woken boolean, next_window_at timestamptz, outcome text) AS $$
DECLARE
    g      admission_groups%ROWTYPE;
    pol    policies%ROWTYPE;
    new_id bigint;
BEGIN
    SELECT * INTO pol FROM policies WHERE action_ref = p_action;
    INSERT INTO admission_groups AS ag (action_ref, group_key, concurrency_limit)
    VALUES (p_action, p_group, pol.concurrency_limit)
    ON CONFLICT (action_ref, group_key) DO UPDATE SET updated_at = now()
    RETURNING ag.* INTO g;
    IF g.queue_length >= p_max_queue THEN
        execution_id := NULL; woken := false; outcome := 'queue_full';
        RETURN NEXT;
        RETURN;
    END IF;
    IF pol.on_limit = 'cancel' AND pol.concurrency_limit IS NOT NULL
       AND (g.active_count >= pol.concurrency_limit OR g.queue_length > 0 OR pol.paused) THEN
        INSERT INTO executions (action_ref, parameters, status, status_reason, group_key, timeout_seconds, retry_of, attempt, finished_at)
        VALUES (p_action, p_params, 'cancelled', 'concurrency limit reached (on_limit: cancel)', p_group, p_timeout,
                p_retry_of, p_attempt, clock_timestamp())
        RETURNING id INTO new_id;
        execution_id := new_id; woken := false; outcome := 'cancelled';
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO executions (action_ref, parameters, status, status_reason, group_key, timeout_seconds, retry_of, attempt)
    VALUES (p_action, p_params, 'requested', 'requested', p_group, p_timeout, p_retry_of, p_attempt)
    RETURNING id INTO new_id;
    INSERT INTO admission_entries (execution_id, action_ref, group_key, seq, state)
    VALUES (new_id, p_action, p_group, g.next_seq, 'queued');
    UPDATE admission_groups ag SET next_seq = ag.next_seq + 1, queue_length = ag.queue_length + 1,
                                   total_enqueued = ag.total_enqueued + 1
     WHERE ag.action_ref = p_action AND ag.group_key = p_group;
    execution_id := new_id; woken := false; next_window_at := NULL; outcome := 'created';
    RETURN NEXT;
    RETURN QUERY SELECT r.execution_id, r.woken, r.next_window_at, 'admitted'::text FROM attune_admit_heads(p_action, p_group) r;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION attune_request(text, jsonb, text, integer, double precision, bigint, integer);
DROP FUNCTION attune_finish(bigint, text[], text, text, integer, text, jsonb, text, text, text, boolean, boolean, integer, double precision);
DROP FUNCTION attune_release(bigint);
DROP FUNCTION attune_admit_heads(text, text);
