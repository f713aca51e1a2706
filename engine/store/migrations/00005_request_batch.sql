-- +goose Up
-- attune_request_batch records many requests in one transaction (one commit
-- for all of them). The caller orders the arrays by (action, group) so
-- every batch takes queue locks in the same order, and keeps arrival order
-- within a queue, so FIFO is the order requests reached the batcher.
-- Rows: (idx, execution_id, woken, next_window_at, outcome) as attune_request,
-- idx being the 1-based position in the arrays.
-- +goose StatementBegin
CREATE FUNCTION attune_request_batch(p_actions text[], p_params jsonb[], p_groups text[], p_max_queue integer[],
                                     p_timeouts double precision[], p_retry_of bigint[], p_attempts integer[])
RETURNS TABLE (idx integer, execution_id bigint, woken boolean, next_window_at timestamptz, outcome text) AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_actions, 1), 0) LOOP
        RETURN QUERY SELECT i, r.execution_id, r.woken, r.next_window_at, r.outcome
          FROM attune_request(p_actions[i], p_params[i], p_groups[i], p_max_queue[i], p_timeouts[i], p_retry_of[i], p_attempts[i]) r;
    END LOOP;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION attune_request_batch(text[], jsonb[], text[], integer[], double precision[], bigint[], integer[]);
