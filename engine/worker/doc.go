// Package worker is the worker engine: it registers itself, heartbeats,
// consumes its dispatch queue with prefetch = capacity, runs executions
// through engine/worker/runtime and records outcomes, fenced on its own id
// and the execution's attempt.
//
// # Worker statuses
//
// A worker row has one status; the executor dispatches only to workers that
// are active and whose heartbeat is younger than 3 × worker.heartbeat_interval.
//
//   - active: registered and eligible for new work.
//   - cordoned (operator, POST /api/v1/workers/{id}/cordon): no new work; the
//     worker keeps consuming its queue, so dispatches already sent to it and
//     running executions finish there. It stays cordoned until uncordoned.
//   - draining (operator, POST …/drain): no new work; the worker finishes
//     everything assigned to it (running executions and dispatches already in
//     its queue), then marks itself drained, within one heartbeat interval.
//   - drained: an operator drain finished; nothing runs there. The process may
//     still be alive and heartbeating. Uncordon makes it active again.
//   - draining with stopped_at set: the worker's own graceful shutdown (see
//     Stop); it ends inactive.
//   - inactive: the process stopped gracefully, or the executor's reaper
//     declared it dead because its heartbeat was older than 3 intervals.
//
// Cordoned and drained are the operator's decisions: neither the worker's
// heartbeat nor its registration after a restart changes them (a worker
// restarted in the middle of an operator drain comes back drained). Only
// uncordon (POST …/uncordon) makes such a worker active.
//
// # Dead workers
//
// The executor's reaper (engine/executor, reapDeadWorkers) releases the
// executions of every worker whose heartbeat is stale: running ones become
// abandoned (their slots freed; retried if the action's retry policy says
// so), scheduled ones go back to requested for another worker. A worker
// that was declared dead but is alive (its heartbeats were only late) gets
// "inactive" back from its next heartbeat and registers again; the results
// of executions it was running then are rejected by the fence ("late result
// rejected") because those executions were already settled.
//
// A worker id is stable across restarts when the appliance persists it
// (<data-dir>/worker.id, see LoadOrCreateID), so its durable queue is reused:
// on start the worker first settles what its previous process left running
// (abandoned, "worker restarted"), then consumes the dispatches waiting in
// its queue.
//
// # Graceful shutdown
//
// Stop marks the worker draining (the executor stops dispatching to it
// within a second, the age of its worker cache), stops consuming, lets
// in-flight executions finish for up to worker.shutdown_timeout, cancels
// the rest with the reason "worker shutting down", and marks it inactive.
// Dispatches still in its queue are not lost: the queue is durable and not
// auto-deleted, the executions stay scheduled on this worker, and the same
// worker id runs them when it starts again. If it does not come back within
// 3 heartbeat intervals, the reaper sends them back to requested so another
// worker runs them (the then stale messages are dropped by the fence if
// this worker returns later, or expire into the dead-letter queue, where
// the handler leaves the execution alone). Past executor.scheduled_timeout
// the timeout monitor fails them.
package worker
